"""The benchmark's targets and its steady-rate window, without running a benchmark."""

from __future__ import annotations

import json

import pytest

from takeover.benchmarks.workers4 import steady_rate
from takeover.commands.bench import TARGETS

NAMES = ["queue_vs_raw", "workers4_vs_queue4", "history_overhead", "check_1m_vs_read", "check_1m_peak_rss_mb"]


def test_targets_are_the_issues():
    assert [t.name for t in TARGETS] == NAMES
    bounds = {t.name: (t.op, t.bound) for t in TARGETS}
    assert bounds["queue_vs_raw"] == (">=", 0.9)
    assert bounds["workers4_vs_queue4"] == (">=", 0.7)
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


def _run(seed: int, caught: bool, first: float | None, at_end: bool = False) -> dict:
    return {"seed": seed, "exit": 1 if caught else 0, "caught": caught,
            "violated": ["lease_exclusive"] if caught else [], "first_violation_s": first, "at_end": at_end,
            "wall_s": 12.0}


def test_detection_figures_and_targets():
    """Caught fraction over every run, median time over the caught ones, targets from issue 12."""
    from takeover.benchmarks.detection import summarise

    b = summarise("X", ("lease_exclusive",), [_run(3, False, None), _run(1, True, 1.0), _run(2, True, 4.0)])
    assert [r["seed"] for r in b["per_run"]] == [1, 2, 3]
    assert (b["runs"], b["caught"], b["caught_fraction"]) == (3, 2, 0.667)
    assert b["median_first_violation_s"] == 2.5
    assert (b["caught_pass"], b["first_pass"]) == (False, True)
    # Seen only at the end of a run: timed by the run's last record, and counted as such.
    b = summarise("X", ("no_lost_task",), [_run(1, True, 30.0, at_end=True)])
    assert (b["caught_fraction"], b["median_first_violation_s"], b["at_end"]) == (1.0, 30.0, 1)
    assert (b["caught_pass"], b["first_pass"]) == (True, False)
    b = summarise("X", ("no_lost_task",), [_run(1, False, None)])
    assert (b["caught_fraction"], b["median_first_violation_s"], b["first_pass"]) == (0.0, None, False)


def test_detection_table_shows_every_bug_with_pass_or_miss(capsys):
    from takeover.benchmarks.detection import summarise, table
    from takeover.commands.bench import print_detection

    fig = {"profile": "stress", "seeds": 2, "seconds": 10.0, "bugs_per_minute": 4.0, "caught_runs": 3,
           "total_runs": 4, "run_minutes": 0.75,
           "targets": {"caught_fraction": ">= 0.95", "median_first_violation_s": "<= 3"},
           "bugs": {"A": summarise("A", ("x",), [_run(1, True, 1.0), _run(2, True, 2.0)]),
                    "B": summarise("B", ("x",), [_run(1, True, 9.0), _run(2, False, None)])}}
    text = table(fig)
    assert "A" in text and "2/2" in text and "1/2" in text and "PASS" in text and "MISS" in text
    assert "4.00" in text
    print_detection(fig)
    out = capsys.readouterr().out
    assert "2/2 (100%)" in out and "1/2 (50%)" in out and "9.00 s" in out and "MISS" in out
    assert "bugs found per minute of run time: 4.00" in out
