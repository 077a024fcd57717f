"""``takeover tune`` for real: a queue that breaks an invariant gets no recommendation but the violation,
loudly, after its first run (a few seconds: the search stops at the first violating run)."""

from __future__ import annotations

import json

import pytest

from tests.helpers.processes import reap_stragglers, takeover

pytestmark = pytest.mark.timeout(90)


@pytest.mark.slow
def test_a_violating_queue_gets_the_violation_and_no_recommendation(tmp_path):
    times = tmp_path / "times.json"
    times.write_text(json.dumps({"p50": 20, "p90": 30, "p99": 40, "max": 50}))
    out = tmp_path / "tune"
    try:
        proc = takeover("tune", "--task-times", str(times), "--queue", "takeover.queues.planted:BumpsByTwo",
                        "--target", "200", "--budget", "1", "--out", str(out), timeout=80)
    finally:
        for cell in (out / "cells").glob("*"):
            reap_stragglers(cell)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    data = json.loads((out / "tuning.json").read_text())
    assert (data["lease"], data["heartbeat"], data["resolved"], data["runs"]) == (None, None, False, 1)
    assert "generation_monotonic" in data["violations"][0]["violated"]
    assert "!!! NO RECOMMENDATION: the queue violated an invariant" in proc.stderr
    assert "INVARIANT VIOLATED" in proc.stderr  # the runner's own loud line, as the sweep prints it
    assert "recommended lease" not in proc.stdout
    assert "NO RECOMMENDATION" in (out / "tuning.md").read_text() and "class='bad'" in (out / "tuning.html").read_text()
    assert data["command"].startswith("takeover tune --task-times ") and "--time-scale " in data["command"]
