"""Runs stopped by Ctrl-C / SIGTERM: ``{"f": "run", "value": "interrupted"}`` instead of ``drain_end``.

Such a run never drained, so "every task is terminal" cannot be judged (no_lost_task is
``unknown``, with a warning), but everything else still can: a task ending terminal without an
attempted action is still a violation, and the workers stopped mid-operation (no completion
record) are indeterminate for every invariant, state_matches_history included.
"""

from __future__ import annotations

import io
import json

from takeover._internal.pipeline import check_and_report
from tests.quality.builder import Run


def _interrupted(marker: str = "interrupted", *, c_finished_unacted: bool = False) -> Run:
    """Three tasks; the run is stopped while w1 is inside finish(a) and w2 works on b; c never claimed."""
    r = Run()
    r.register("a", "b", "c")
    r.spawn(1, "w1")
    r.spawn(2, "w2")
    r.run_event(0.1, "start")
    r.claim(1, 1, "a", 1)
    r.action(1, 2, "a", 1)
    r.finish(1, 3, "a", 1, status="open")  # cut off by the stop: no completion
    r.claim(2, 1.5, "b", 1)
    if c_finished_unacted:  # a queue that lets a finish through without its action (w2 skips it)
        r.claim(2, 2.0, "c", 1)
        r.finish(2, 2.1, "c", 1)
    r.run_event(3.01, "faults_stop")
    r.run_event(3.02, marker)
    r.rec(3.5, 0, "ok", "exit", target=1, worker="w1", value="-15")
    r.rec(3.5, 0, "ok", "exit", target=2, worker="w2", value="-15")
    # The cut-off finish took effect; b is still held, c was never claimed.
    r.snap(("a", "done", 1, None), ("b", "running", 1, 6.5),
           ("c", "done", 1, None) if c_finished_unacted else ("c", "pending", 0, None))
    return r


def _check(r: Run, tmp_path) -> tuple[int, dict]:
    folder = r.write(tmp_path / "run", config={"tasks": 3})
    code = check_and_report(folder, out=io.StringIO(), reports=False).exit_code
    return code, json.loads((folder / "summary.json").read_text())


def test_interrupted_run_leaves_no_lost_task_unknown_and_says_why(tmp_path) -> None:
    code, s = _check(_interrupted(), tmp_path)
    inv = s["invariants"]
    assert inv["no_lost_task"]["valid"] == "unknown", inv["no_lost_task"]
    assert "interrupted" in inv["no_lost_task"]["note"]
    assert all(v["valid"] is True for n, v in inv.items() if n != "no_lost_task"), inv
    assert s["valid"] == "unknown" and code == 3
    assert s["interrupted"] is True
    assert any("interrupted" in w for w in s["warnings"]), s["warnings"]


def test_the_same_run_after_a_drain_is_a_lost_task(tmp_path) -> None:
    """The control: the very same records with ``drain_end`` are a real violation."""
    code, s = _check(_interrupted("drain_end"), tmp_path)
    assert s["invariants"]["no_lost_task"]["valid"] is False
    assert s["invariants"]["no_lost_task"]["violations"] == 2  # b running, c pending
    assert s["interrupted"] is False and code == 1


def test_interrupted_run_still_catches_terminal_without_an_action(tmp_path) -> None:
    r = _interrupted(c_finished_unacted=True)
    code, s = _check(r, tmp_path)
    nl = s["invariants"]["no_lost_task"]
    assert nl["valid"] is False and nl["violations"] == 1, nl
    assert nl["examples"][0]["task"] == "c"
    assert "never attempted" in nl["examples"][0]["problem"]
    assert code == 1


def test_interrupted_run_with_a_cut_off_finish_that_did_not_happen(tmp_path) -> None:
    """The stopped finish may equally not have taken effect: a still running is explained too."""
    r = _interrupted()
    r.snap(("a", "running", 1, 6.0), ("b", "running", 1, 6.5), ("c", "pending", 0, None))
    code, s = _check(r, tmp_path)
    assert s["invariants"]["state_matches_history"]["valid"] is True, s["invariants"]["state_matches_history"]
    assert s["invariants"]["no_lost_task"]["valid"] == "unknown"
    assert code == 3
