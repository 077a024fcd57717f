"""The aimed kinds written in modules of their own (stale_heartbeat, lease_edge) and duplicate_register's
states, in real short runs: each reaches its window, the history shows it did, the reference queue keeps
every promise there, and a queue with the mistake the window aims at is caught.

As in tests/system/test_aimed.py (whose ``stress`` helper runs these), a run that got no window in (a
loaded machine) is run again with the next seed (tests.helpers.attempts.until_shown); the assertions then
read the first run that did.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from takeover._internal.run.lease_edge import SIDES
from tests.helpers.attempts import until_shown
from tests.helpers.processes import records
from tests.system.test_aimed import REFERENCE, hits, ops, stress, the_claim

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

Got = tuple[dict[str, Any], list[dict[str, Any]]]


def _run(tmp_path: Path, queue: str, missing_hit: str, seed: int = 1, **rates: float) -> Got:
    def run(i: int) -> Got:
        run_dir = tmp_path / f"run{i}"
        return stress(run_dir, seed=seed + i, duration=4, queue=queue, **rates), records(run_dir)

    return until_shown(run, lambda got: None if hits(got[1], missing_hit) else f"hit of {missing_hit}")


def _invalid(summary: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in summary["invariants"].items() if v["valid"] is not True}


@pytest.mark.parametrize("queue", [REFERENCE, "user_mistakes:ExtendIgnoresGeneration"])
def test_stale_heartbeat_heartbeats_a_stale_generation_while_the_new_holder_holds_the_task(
        tmp_path: Path, queue: str) -> None:  # fmt: skip
    """Every hit: the old holder's extend of its own generation is invoked after the newer generation's
    claim returned, inside that claim's lease, with --heartbeat 0 (the smoke profile's). The reference
    queue refuses it (lost) and stays valid; a heartbeat that ignores the generation is answered, and
    lease_exclusive names the task."""
    summary, recs = _run(tmp_path, queue, "stale_heartbeat", stale_heartbeat=1.0)
    for hit in hits(recs, "stale_heartbeat"):
        old = the_claim(recs, hit["task"], hit["gen"])
        new = the_claim(recs, hit["task"], hit["new_gen"])
        beats = [r for r in ops(recs, "extend", "invoke", process=old["process"], task=hit["task"], gen=hit["gen"])
                 if new["time"] < r["time"] < hit["time"]]
        assert len(beats) == 1, (hit, beats)
        assert beats[0]["now"] < new["lease_until"], (beats, new)
    if queue == REFERENCE:
        assert summary["valid"] is True, _invalid(summary)
        answered = [r["type"] for r in recs if r["f"] == "extend" and r["type"] != "invoke"]
        assert "fail" in answered, answered
        return
    assert summary["invariants"]["lease_exclusive"]["valid"] is False, _invalid(summary)
    named = {ex["task"] for ex in summary["invariants"]["lease_exclusive"]["examples"]}
    assert named & {h["task"] for h in hits(recs, "stale_heartbeat")}
    patterns = [d["pattern"] for d in summary["diagnosis"] if d["invariant"] == "lease_exclusive"]
    assert "stale_extend" in patterns, summary["diagnosis"]


def test_lease_edge_times_finishes_on_every_side_of_the_lease_end_before_any_takeover(tmp_path: Path) -> None:
    """Every hit: the frozen holder's finish is called with no claim of its task in between; on the two
    sides past the end its ``now`` is past ``lease_until`` (further_past: by more than a tick), and the
    reference queue refuses it; the run stays valid. Each side is dealt within the run's windows."""
    def missing(got: Got) -> str | None:
        sides = {h["side"] for h in hits(got[1], "lease_edge")}
        return None if sides == set(SIDES) else f"hit of every side (hit: {sorted(sides)})"

    def run(i: int) -> Got:
        run_dir = tmp_path / f"run{i}"
        return stress(run_dir, seed=1 + i, duration=4, lease_edge=1.5), records(run_dir)

    summary, recs = until_shown(run, missing)
    assert summary["valid"] is True, _invalid(summary)
    for hit in hits(recs, "lease_edge"):
        claim = the_claim(recs, hit["task"], hit["gen"])
        fins = [r for r in ops(recs, "finish", "invoke", process=claim["process"], task=hit["task"], gen=hit["gen"])]
        assert len(fins) == 1, (hit, fins)
        taken = [r for r in ops(recs, "claim", "ok", task=hit["task"]) if claim["time"] < r["time"] < fins[0]["time"]]
        assert not taken, (hit, taken)
        if hit["side"] == "before":
            assert hit["late"] < 0, hit
        else:
            assert fins[0]["now"] >= hit["lease_until"], (hit, fins)
            answer = next(r for r in recs if r["f"] == "finish" and r["type"] != "invoke"
                          and r["process"] == claim["process"] and r.get("task") == hit["task"])
            assert answer["type"] == "fail", (hit, answer)
        if hit["side"] == "further_past":
            assert fins[0]["now"] - hit["lease_until"] >= 0.05, (hit, fins)
    assert {h["side"] for h in hits(recs, "lease_edge")} == set(SIDES)


def test_lease_edge_catches_a_finish_that_tolerates_lateness(tmp_path: Path) -> None:
    """Only lease_edge on: a finish that accepts up to 0.25 s past the lease is caught by
    finish_within_lease, on a task a window was reached on."""
    summary, recs = _run(tmp_path, "user_mistakes:SkewTolerantFinish", "lease_edge", lease_edge=1.5)
    assert summary["invariants"]["finish_within_lease"]["valid"] is False, _invalid(summary)
    named = {ex["task"] for ex in summary["invariants"]["finish_within_lease"]["examples"]}
    assert named & {h["task"] for h in hits(recs, "lease_edge")}


def test_duplicate_register_takes_uncertain_tasks_and_counts_its_windows_per_state(tmp_path: Path) -> None:
    """With lost replies making uncertain tasks, duplicate_register's deck reaches an uncertain one; the
    coverage counts its windows per state as the records say. A register that resets an uncertain task
    to pending is caught (the task is claimed again after its uncertain finish)."""
    def run(i: int) -> Got:
        run_dir = tmp_path / f"run{i}"
        return stress(run_dir, seed=1 + i, duration=4, queue="user_mistakes:RegisterResetsUncertain",
                      duplicate_register=1.5, lose_reply=0.4), records(run_dir)

    def missing(got: Got) -> str | None:
        states = [r.get("state") for r in ops(got[1], "duplicate_register", "ok")]
        return None if "uncertain" in states else f"window on an uncertain task (states: {states})"

    summary, recs = until_shown(run, missing)
    ends = list(ops(recs, "duplicate_register", "ok"))
    by_state = summary["coverage"]["aimed"]["duplicate_register"]["by_state"]
    assert sum(w["total"] for w in by_state.values()) == len(ends)
    for state, w in by_state.items():
        mine = [r for r in ends if r.get("state") == state]
        assert w == {"total": len(mine), "hit": sum(1 for r in mine if r["value"] == "hit")}, (state, w)
    assert set(by_state) <= {"pending", "running", "done", "uncertain"}
    assert summary["invariants"]["no_reclaim_after_terminal"]["valid"] is False, _invalid(summary)
