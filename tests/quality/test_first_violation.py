"""``InvariantResult.first_at`` on stored runs: the moment the detection bench measures.

Why: the detection bench (takeover.benchmarks.detection) reports the median time to first
violation from this field alone, and summary.json does not carry it, so test_stored_runs.py cannot
see it drift. Checked on the stored runs: it is the earliest violating operation (the first example
where the example carries the operation's invoke time), inside the run, and None wherever an
invariant holds or only the final snapshot shows the violation.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from takeover._internal.checker.check import analyse

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"


def _analyse(name: str, tmp_path: Path):
    copy = tmp_path / name
    shutil.copytree(RUNS / name, copy)
    return analyse(copy)


def test_the_stale_finish_is_the_first_violation(tmp_path):
    res = _analyse("planted-finish-ignores-generation", tmp_path)
    inv = res.invariants
    assert inv["no_stale_commit"].first_at == inv["no_stale_commit"].examples[0]["finish_at"] == pytest.approx(1.029)
    # The same late finish, judged by its lease: the same moment.
    assert inv["finish_within_lease"].first_at == pytest.approx(1.029)
    # Seen only in the final snapshot: no operation to time.
    assert inv["state_matches_history"].valid is False and inv["state_matches_history"].first_at is None
    assert all(r.first_at is None for r in inv.values() if r.valid is True)


def test_a_stolen_lease_is_timed_inside_the_run(tmp_path):
    res = _analyse("planted-steals", tmp_path)
    first = res.invariants["lease_exclusive"].first_at
    assert first is not None and 0 < first <= res.facts.rel(res.facts.t1)
    # The grant was judged at its ``now``, which the queue read after the claim was invoked.
    assert first <= res.invariants["lease_exclusive"].examples[0]["granted_now"]
    assert first == pytest.approx(0.658, abs=1e-3)  # the stored run is fixed: its first double grant


def test_a_valid_run_has_no_first_violation(tmp_path):
    res = _analyse("ref-valid", tmp_path)
    assert all(r.first_at is None for r in res.invariants.values())


def test_a_lease_granted_with_the_generation_back_is_timed_at_the_later_grant(tmp_path):
    """A queue that resets a task hands out generation 1 at 8 while generation 2 (claimed at 6) is
    held: the double grant exists from 8 on. Pairs go by generation, so the pair's own claim is the
    earlier one (6), when nothing was wrong yet; the time is the later of the two."""
    from tests.quality.cases import CASES

    res = analyse(CASES["reregister_then_claim_with_the_generation_back"][0]().write(tmp_path / "run"))
    inv = res.invariants
    assert inv["lease_exclusive"].valid is False
    back = inv["generation_monotonic"].first_at  # the generation-1 claim at 8
    assert back is not None and inv["lease_exclusive"].first_at == pytest.approx(back)
    assert inv["lease_exclusive"].first_at > inv["lease_exclusive"].examples[0]["granted_now"]
