"""Duplicate side effects split by cause: hand-built histories with known causes, and a real run of
a queue that steals live leases.

Why it matters: ``lost_lease`` tells a user to lengthen the lease or add heartbeats, ``other``
(a double lease) says the queue itself is broken. A queue that hands out a live lease makes its
victim's finish fail and lets it act after the thief, which reads like a paused holder unless the
lease at the takeover is looked at.
"""

from __future__ import annotations

import contextlib
import io
import json
import sqlite3
import subprocess
from pathlib import Path

import pytest

import takeover._internal.checker.duplicate_causes as causes_module
from takeover._internal.pipeline import check_and_report
from tests.helpers.attempts import ATTEMPTS, until_shown
from tests.helpers.processes import reap_stragglers, records, takeover
from tests.quality.cases import CASES, DUPLICATE_CAUSES

# Older cases whose single extra action has a known cause too.
KNOWN = {**DUPLICATE_CAUSES, "paused_holder_late_finish_rejected": "lost_lease",
         "killed_finish_that_did_not_happen": "s5"}
STEALS = "takeover.queues.planted:StealsLiveLeases"


def _summary(folder: Path, *, reports: bool = False) -> dict:
    check_and_report(folder, out=io.StringIO(), reports=reports)
    return json.loads((folder / "summary.json").read_text())


@pytest.mark.parametrize("name", sorted(KNOWN))
def test_each_extra_action_gets_its_known_cause(name: str, tmp_path) -> None:
    d = _summary(CASES[name][0]().write(tmp_path / name))["duplicates"]
    want = KNOWN[name]
    assert (d["tasks"], d["extra_actions"]) == (1, 1), d
    assert d["by_cause"] == {c: int(c == want) for c in d["by_cause"]}, d
    # ``clock`` is listed only in runs with clock faults, so summaries of runs without them keep their keys.
    clocks = any(rec["f"].startswith("clock_") for rec in CASES[name][0]().records)
    assert list(d["by_cause"]) == ["s5", "lost_lease", "other", *(["clock"] if clocks else [])], d
    (ex,) = d["examples"]
    assert ex["cause"] == want
    # The example shows the evidence: the older generation's lease against the takeover's now.
    double = ex["older_lease_until"] > ex["taken_over_at"]
    assert double == (want == "other"), ex


def test_an_extension_counts_only_when_it_returned_before_the_takeover(tmp_path) -> None:
    """The extended lease (until 8), not the claim's (until 5), is what the takeover at 6 broke."""
    d = _summary(CASES["double_lease_inside_an_extended_lease"][0]().write(tmp_path / "x"))["duplicates"]
    ex = d["examples"][0]
    assert (ex["older_lease_until"], ex["taken_over_at"]) == (8.0, 6.0)


def test_the_report_says_what_each_cause_means(tmp_path) -> None:
    folder = CASES["double_lease_holder_acted_after_the_thief"][0]().write(tmp_path / "r")
    _summary(folder, reports=True)
    report = (folder / "report.md").read_text()
    assert "| other | 1 |" in report
    assert "double lease" in report and "lease_exclusive" in report
    assert "| lost_lease | 0 |" in report and "outlived" in report


def _claims(run_dir: Path) -> dict[str, dict[int, tuple[float, float]]]:
    """Each task's recorded claims from the raw history: generation -> (now, lease_until)."""
    claims: dict[str, dict[int, tuple[float, float]]] = {}
    for r in records(run_dir):
        if r.get("f") == "claim" and r.get("type") == "ok" and r.get("task") is not None:
            claims.setdefault(r["task"], {})[int(r["gen"])] = (float(r["now"]), float(r["lease_until"]))
    return claims


def _repeats_over_a_live_lease(run_dir: Path) -> int:
    """Actions (by the ledger) repeated by a later generation of a task that was taken over while the
    acting generation's lease was live (by the raw history): what the test needs a run to show."""
    claims = _claims(run_dir)
    with contextlib.closing(sqlite3.connect(run_dir / "ledger.sqlite")) as conn:
        acted = conn.execute("SELECT task_id, generation FROM actions WHERE performed = 1").fetchall()
    gens_acted: dict[str, list[int]] = {}
    for task, gen in acted:
        gens_acted.setdefault(task, []).append(int(gen))
    count = 0
    for task, acting in gens_acted.items():
        gens = claims.get(task, {})
        for older in sorted(set(acting))[:-1]:
            later = [g for g in gens if g > older]
            count += older in gens and bool(later) and gens[older][1] > gens[min(later)][0]
    return count


@pytest.mark.nightly
@pytest.mark.slow
@pytest.mark.timeout(60 + 130 * ATTEMPTS)
def test_a_queue_that_steals_live_leases_shows_its_duplicates_as_other(tmp_path, monkeypatch) -> None:
    """A real smoke run of StealsLiveLeases (leases count as expired half a lease early). Every
    extra action whose older generation still held its lease when the task was taken over (judged
    here from the raw history, not by the checker) must be ``other``; kills and pauses may still
    cause honest ``s5`` / ``lost_lease`` duplicates on other tasks, after a lease really ran out.

    A run whose workers barely moved (a loaded machine: no finish accepted in the faulted phase)
    may steal no live lease, or steal one and see no second action on that task; it is made again
    with the next seed, up to ATTEMPTS runs. A queue that no longer steals shows no such repeat in
    any of them, and the assertions below fail on the last."""

    def run(attempt: int) -> tuple[Path, subprocess.CompletedProcess]:
        run_dir = tmp_path / f"steal{attempt}"
        try:
            proc = takeover("stress", "--queue", STEALS, "--profile", "smoke", "--seed", str(1 + attempt),
                            "--out", str(run_dir), timeout=120)  # fmt: skip
        finally:
            reap_stragglers(run_dir)
        return run_dir, proc

    run_dir, proc = until_shown(run, lambda r: None if _repeats_over_a_live_lease(r[0]) else "repeat over a live lease")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["invariants"]["lease_exclusive"]["valid"] is False
    assert summary["config"]["heartbeat"] in (0, 0.0, None)  # no extends: a claim's lease is the lease
    assert summary["duplicates"]["by_cause"]["other"] > 0, summary["duplicates"]

    # Every extra action, not just the first few examples.
    monkeypatch.setattr(causes_module, "EXAMPLES", 1_000_000)
    d = _summary(run_dir)["duplicates"]
    assert len(d["examples"]) == d["extra_actions"] == sum(d["by_cause"].values())
    claims = _claims(run_dir)
    double_leased = 0
    for ex in d["examples"]:
        gens = claims[ex["task"]]
        older = min(ex["gen"], ex["earlier_gen"])
        later = [g for g in gens if g > older]
        if older not in gens or not later or ex["gen"] == ex["earlier_gen"]:
            continue
        if gens[older][1] > gens[min(later)][0]:
            double_leased += 1
            assert ex["cause"] == "other", ex
    assert double_leased > 0, d["examples"]
