"""Clock faults on a correct queue, in one short real run: skewed and jumping worker clocks make the
reference queue hand out leases that, on the real clock, were still held, so tasks are acted on twice;
those duplicates carry the cause ``clock`` and every invariant holds (leases are judged by the ``now``
each call was given). The draws, the board's channel and the attribution on hand-written histories are
tests/unit/test_clock.py.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict

import pytest

from tests.helpers.processes import reap_stragglers, records, takeover

pytestmark = [pytest.mark.timeout(150), pytest.mark.slow]

CLOCKS = ("--clock-skew-max", "1", "--clock-jump-rate", "2", "--clock-jump-max", "0.8")


def test_skewed_and_jumping_clocks_cause_clock_duplicates_and_no_violation(tmp_path):
    run_dir = tmp_path / "clock"
    try:
        proc = takeover("stress", "--profile", "smoke", "--no-faults", "--workers", "3", "--tasks", "40",
                        "--duration", "1", "--lease", "0.3", "--seed", "2", *CLOCKS, "--out", str(run_dir),
                        timeout=120)  # fmt: skip
    finally:
        reap_stragglers(run_dir)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["valid"] is True
    by_cause = summary["duplicates"]["by_cause"]
    assert by_cause["clock"] > 0 and by_cause["other"] == 0, by_cause
    assert "clock faults: 3 worker incarnation(s) with a skewed clock" in proc.stdout
    config = json.loads((run_dir / "config.json").read_text())
    assert (config["clock_skew_max"], config["clock_jump_rate"], config["clock_jump_max"]) == (1.0, 2.0, 0.8)
    assert " ".join(CLOCKS) in config["command"]

    # Each call's now is the real time of its record plus the offset its worker recorded before it.
    hist = records(run_dir)
    offset: dict[int, float] = defaultdict(float)
    error: dict[int, list[float]] = defaultdict(list)
    for r in hist:
        if r["f"] in ("clock_skew", "clock_jump") and r["type"] == "invoke":
            offset[r["process"]] += float(r["value"])
        elif r["f"] == "claim" and r["type"] == "invoke":
            error[r["process"]].append(r["now"] - r["time"] - offset[r["process"]])
    jumps = [r for r in hist if r["f"] == "clock_jump" and r["type"] == "invoke"]
    assert jumps and summary["coverage"]["clock"]["jumps"] == len(jumps)
    assert summary["coverage"]["clock"]["skewed"] == 3
    # The median, not every call: a loaded machine may deschedule a worker between reading its clock and
    # writing the record.
    assert all(abs(statistics.median(e)) < 0.01 for e in error.values()), error
