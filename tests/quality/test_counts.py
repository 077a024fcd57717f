"""Counts that people compare with the queue: final states versus acknowledged finishes."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from takeover._internal.pipeline import check_and_report
from tests.quality.builder import Run, one_task
from tests.quality.cases import (
    killed_finish_explains_terminal_state,
    reregister_then_claim_with_the_generation_back,
    reregister_then_reclaim_of_the_done_task,
)


def test_final_states_come_from_the_snapshot_and_acknowledged_from_returned_finishes(tmp_path) -> None:
    run_dir = killed_finish_explains_terminal_state().write(tmp_path / "run")
    out = io.StringIO()
    assert check_and_report(run_dir, out=out).exit_code == 0
    counts = json.loads((run_dir / "summary.json").read_text())["counts"]
    # Both tasks ended done, but only b's finish returned: a's worker was killed mid-finish.
    assert counts["final_states"] == {"done": 2}
    assert counts["acknowledged"] == 1
    assert "final done 2; acknowledged done 1" in out.getvalue()
    assert "| final states (the queue's snapshot) | done 2 |" in (run_dir / "report.md").read_text()


# ---- takeovers and orphan recovery ----------------------------------------------------------
# A takeover is a claim of a task whose previous hand-out had not ended; orphan recovery is the time from
# that hand-out's lease end to the claim. graphile-worker's page showed -14,374 s: its retry of a job
# failed as uncertain, claimed seconds into the 4-hour lock, was counted as a takeover of the failed
# attempt (the check for an accepted finish compared a claim's history row with the finishes' rows, so
# it never matched), and so was the claim of a finished job registered again.


def _takeover_counts(run: Run, folder: Path) -> tuple[int, dict]:
    check_and_report(run.write(folder), out=io.StringIO(), reports=False)
    counts = json.loads((folder / "summary.json").read_text())["counts"]
    return counts["takeovers"], counts["orphan_recovery_s"]


def retried_after_an_accepted_finish() -> Run:
    """graphile-worker's retry (seed 3 of its page, task t000014): w1's attempt of a is failed (an accepted
    uncertain finish at 3, lease until 6) and the queue hands a out again at 4, as generation 2."""
    r = one_task()
    r.work(1, 1, "a", 1, "uncertain")
    r.work(2, 4, "a", 2)
    r.snap(("a", "done", 2, None))
    return r


def test_a_task_handed_out_again_after_an_accepted_finish_is_no_takeover(tmp_path: Path) -> None:
    # Before: 1 takeover, recovery p50 -2.0 s (the claim at 4 minus the failed attempt's lease end, 6).
    takeovers, recovery = _takeover_counts(retried_after_an_accepted_finish(), tmp_path / "retry")
    assert takeovers == 0
    assert recovery == {"n": 0, "p50": None, "p99": None, "max": None}
    # A finished task registered again and handed out again (generation 1 again): no takeover either.
    takeovers, recovery = _takeover_counts(reregister_then_reclaim_of_the_done_task(), tmp_path / "again")
    assert (takeovers, recovery["n"]) == (0, 0)


def test_a_takeover_is_counted_from_the_lease_end_whatever_the_stale_holder_finishes_later(tmp_path: Path) -> None:
    """w1 holds a until 5 and freezes; w2 takes it over at 6; w1's stale finish of generation 1 is accepted
    at 7, after the takeover: it does not undo it."""
    r = one_task()
    r.claim(1, 0, "a", 1)
    r.pause(1, 0.5, 6.9, task="a", gen=1)
    r.claim(2, 6, "a", 2)
    r.finish(1, 7, "a", 1)
    r.action(2, 7.5, "a", 2)
    r.finish(2, 8, "a", 2)
    r.snap(("a", "done", 2, None))
    takeovers, recovery = _takeover_counts(r, tmp_path / "run")
    assert takeovers == 1
    assert recovery["n"] == 1 and recovery["p50"] == pytest.approx(1.0)


def test_a_task_registered_again_is_taken_over_from_its_new_holder_only(tmp_path: Path) -> None:
    """a is done at generation 1, registered again and reset: w2 claims generation 1 again at 5 (lease until
    10) and is killed; w1 takes it over at 11. The first finish ended the first hand-out only."""
    r = one_task()
    r.work(1, 1, "a", 1)
    r.reregister(4, 0, "a")
    r.claim(2, 5, "a", 1)
    r.kill(2, 6, task="a", gen=1)
    r.work(1, 11, "a", 2)
    r.snap(("a", "done", 2, None))
    takeovers, recovery = _takeover_counts(r, tmp_path / "run")
    assert takeovers == 1
    assert recovery["n"] == 1 and recovery["p50"] == pytest.approx(1.0)


def test_a_claim_given_a_generation_back_is_not_taken_for_a_recovery_before_its_predecessor(tmp_path) -> None:
    """Generation 2 at 6 took a over from generation 1 (lease end 5); the reset's generation 1 at 8 came after
    it. In generation order the claim at 6 followed the one at 8, a recovery of 6 - 13 = -7 s."""
    takeovers, recovery = _takeover_counts(reregister_then_claim_with_the_generation_back(), tmp_path / "run")
    assert takeovers == 2  # at 6 from w1 (killed), at 8 from w2 (still holding generation 2)
    assert recovery["n"] == 1 and recovery["p50"] == pytest.approx(1.0)
