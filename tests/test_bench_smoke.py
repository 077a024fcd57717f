"""``takeover bench --quick``: the benchmarks run end to end and report every figure with its target.

The sizes are tiny, so no figure is judged here (the machine is shared and loaded): the test
proves that each measurement ran, produced positive absolute figures, and that the table and
bench.json carry exactly the issue's names with a PASS/MISS each.
"""

from __future__ import annotations

import json

import pytest

from takeover.benchmarks.workers4 import steady_rate
from takeover.commands.bench import TARGETS
from tests.stress_helpers import takeover

NAMES = ["queue_vs_raw", "workers4_vs_raw", "history_overhead", "check_1m_vs_read", "check_1m_peak_rss_mb"]


@pytest.mark.timeout(120)
def test_quick_bench_writes_every_figure(tmp_path):
    out = tmp_path / "bench.json"
    proc = takeover("bench", "--quick", "--out", str(out), timeout=110)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["quick"] is True
    assert [r["name"] for r in doc["results"]] == NAMES
    for row in doc["results"]:
        assert row["value"] > 0, row
        assert isinstance(row["pass"], bool)
        assert row["target"].split()[0] in (">=", "<=")
        assert row["absolute"], row
        assert row["name"] in proc.stdout
    w4 = doc["measurements"]["workers4_vs_raw"]
    assert w4["workers4_pairs_per_s"] > 0 and w4["raw_pairs_per_s"] > 0
    # The ceiling beside it: the queue alone in 4 processes, and the split of the gap.
    assert w4["queue4_pairs_per_s"] > 0
    assert w4["workers4_vs_queue4"] == pytest.approx(w4["workers4_pairs_per_s"] / w4["queue4_pairs_per_s"])
    row = next(r for r in doc["results"] if r["name"] == "workers4_vs_raw")
    assert "alone in 4 processes" in row["absolute"]
    assert doc["measurements"]["check_1m"]["events"] > 1000
    assert "PASS" in proc.stdout or "MISS" in proc.stdout


def test_targets_are_the_issues():
    assert [t.name for t in TARGETS] == NAMES
    bounds = {t.name: (t.op, t.bound) for t in TARGETS}
    assert bounds["queue_vs_raw"] == (">=", 0.9)
    assert bounds["workers4_vs_raw"] == (">=", 0.8)
    assert bounds["history_overhead"] == (">=", 0.75)
    assert bounds["check_1m_vs_read"] == ("<=", 3.0)
    assert bounds["check_1m_peak_rss_mb"] == ("<=", 600.0)


def test_bad_out_is_one_line_exit_2(tmp_path):
    proc = takeover("bench", "--quick", "--out", str(tmp_path))
    assert proc.returncode == 2
    assert "is a directory" in proc.stderr and "Traceback" not in proc.stderr
    proc = takeover("bench", "--quick", "--out", str(tmp_path / "missing" / "b.json"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_steady_rate_counts_only_the_steady_window(tmp_path):
    """Start-up (until every worker's first claim + warm-up) and the tail are not counted."""
    lines = []
    for p in (1, 2):
        lines.append({"time": 10.0 + p, "process": p, "type": "ok", "f": "claim"})
    # 100 finishes per second from t=10 to t=20: the window is [12.3, faults_stop=18).
    for i in range(1000):
        lines.append({"time": 10.0 + i * 0.01, "process": 1, "type": "ok", "f": "finish"})
    lines.append({"time": 18.0, "process": 0, "type": "info", "f": "run", "value": "faults_stop"})
    hist = tmp_path / "history.jsonl"
    hist.write_text("".join(json.dumps(r) + "\n" for r in lines))
    rate, counted, window = steady_rate(hist, tasks=100_000)
    assert window == pytest.approx(18.0 - 12.3)
    assert counted == pytest.approx(570, abs=2)
    assert rate == pytest.approx(100, rel=0.01)
