"""Counts that people compare with the queue: final states versus acknowledged finishes."""

from __future__ import annotations

import io
import json

from takeover._internal.pipeline import check_and_report
from tests.quality.cases import killed_finish_explains_terminal_state


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
