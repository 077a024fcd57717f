"""The benchmark's targets and its steady-rate window, without running a benchmark."""

from __future__ import annotations

import json

import pytest

from takeover.benchmarks.workers4 import steady_rate
from takeover.commands.bench import TARGETS

NAMES = ["queue_vs_raw", "workers4_vs_raw", "history_overhead", "check_1m_vs_read", "check_1m_peak_rss_mb"]


def test_targets_are_the_issues():
    assert [t.name for t in TARGETS] == NAMES
    bounds = {t.name: (t.op, t.bound) for t in TARGETS}
    assert bounds["queue_vs_raw"] == (">=", 0.9)
    assert bounds["workers4_vs_raw"] == (">=", 0.8)
    assert bounds["history_overhead"] == (">=", 0.75)
    assert bounds["check_1m_vs_read"] == ("<=", 3.0)
    assert bounds["check_1m_peak_rss_mb"] == ("<=", 600.0)


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
