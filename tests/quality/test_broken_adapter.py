"""A run whose ``exec:`` adapter broke the protocol is INCONCLUSIVE, whatever its invariants say (issue 34).

The checker reads the ``adapter`` records its processes wrote (takeover._internal.bridge tells them each line naming a
broken adapter): a queue judged on what a broken adapter answered would be blamed for the wire's fault (a task
that a dead adapter never handed out read as "the claim does not hand out every pending task (S1)"). The real
runs, with real broken adapters, are in tests/system/test_bridge.py.
"""

from __future__ import annotations

import io
import json

from takeover._internal.pipeline import check_and_report
from tests.quality.cases import reclaim_after_done

LINE = "adapter 'node queue.js' (pid 7): request 9 (claim): exited with code 3; adapter.log ends: boom"


def _check(run, folder):
    out = io.StringIO()
    code = check_and_report(run.write(folder), out=out, reports=False).exit_code
    return code, json.loads((folder / "summary.json").read_text()), out.getvalue()


def test_a_broken_adapter_makes_a_violating_run_inconclusive_without_a_diagnosis(tmp_path):
    code, summary, _ = _check(reclaim_after_done(), tmp_path / "plain")
    assert code == 1 and summary["diagnosis"], "the case violates invariants on its own"
    run = reclaim_after_done()
    run.rec(11, 2, "info", "adapter", worker="w2", value="claim", detail=LINE)
    run.rec(12, 1, "info", "adapter", worker="w1", value="finish", detail="adapter ...: another line")
    code, summary, printed = _check(run, tmp_path / "broken")
    assert code == 3 and summary["exit_code"] == 3 and summary["valid"] == "unknown"
    assert summary["inconclusive"] == ("the queue's adapter broke the protocol, so the run says nothing about the "
                                       f"queue: {LINE} (and 1 more: the history's 'adapter' records)")
    assert "diagnosis" not in summary
    assert printed.startswith("INCONCLUSIVE") and f"inconclusive: {summary['inconclusive']}" in printed


def test_a_violation_beside_nothing_tested_is_invalid_and_says_so_once(tmp_path):
    """Before issue 34 the summary said "inconclusive: no queue operation completed" beside exit 1: a verdict
    and its reason must agree. An INVALID run keeps its verdict; the reason becomes a warning."""
    from tests.quality.builder import Run

    run = Run()
    run.register("a")
    run.rec(1.0, 1, "invoke", "claim", worker="w1", now=1.0, lease=5.0)
    run.rec(1.1, 1, "info", "claim", worker="w1", error="RuntimeError: database is locked")
    run.snap(("a", "pending", 0, None))
    code, summary, _ = _check(run, tmp_path / "r")
    assert code == 1 and summary["valid"] is False and summary["inconclusive"] is None
    assert any(w.startswith("no queue operation completed") for w in summary["warnings"]), summary["warnings"]
