"""``takeover bench --quick``: the benchmarks run end to end and report every figure with its target.

The sizes are tiny, so no figure is judged here (the machine is shared and loaded): the test
proves that each measurement ran, produced positive absolute figures, and that the table and
bench.json carry exactly the issue's names with a PASS/MISS each.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from takeover.benchmarks.sources import MEASURE
from takeover.benchmarks.targets import TARGETS
from tests.helpers.processes import REPO, takeover


@pytest.mark.nightly
@pytest.mark.slow
@pytest.mark.timeout(120)
def test_quick_bench_writes_every_figure(tmp_path):
    out = tmp_path / "bench.json"
    proc = takeover("bench", "--quick", "--out", str(out), timeout=110)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["quick"] is True
    # Every target, in order (tests/unit/test_bench.py pins the names and bounds of TARGETS).
    assert [r["name"] for r in doc["results"]] == [t.name for t in TARGETS if t.source in MEASURE]
    for row in doc["results"]:
        assert row["value"] > 0, row
        assert isinstance(row["pass"], bool)
        # its spread over the rounds, the verdict that spread allows, and when and under what load
        assert row["verdict"] in ("PASS", "MISS", "noisy") and row["iqr"][0] <= row["value"] <= row["iqr"][1], row
        assert row["rounds"] >= 1 and row["when"] and set(row["load_avg"]) == {"min", "median", "max"}
        assert row["target"].split()[0] in (">=", "<=")
        assert row["absolute"], row
        assert row["name"] in proc.stdout
    w4 = doc["measurements"]["workers4_vs_raw"]
    assert w4["workers4_pairs_per_s"] > 0 and w4["raw_pairs_per_s"] > 0
    # The ceiling beside it: the queue alone in 4 processes, and the split of the gap.
    assert w4["queue4_pairs_per_s"] > 0
    assert w4["workers4_vs_queue4"] == pytest.approx(w4["workers4_pairs_per_s"] / w4["queue4_pairs_per_s"])
    # ... and the same queue with one action per pair on a real service: the action's cost, then the bookkeeping's.
    assert w4["queue4_service_pairs_per_s"] > 0
    assert w4["queue4_service_vs_queue4"] == pytest.approx(w4["queue4_service_pairs_per_s"] / w4["queue4_pairs_per_s"])
    assert w4["workers4_vs_queue4_service"] == pytest.approx(
        w4["workers4_pairs_per_s"] / w4["queue4_service_pairs_per_s"])
    # ... and the floor: the same round trip to a bare echo peer, no ledger.
    assert w4["queue4_echo_pairs_per_s"] > 0
    assert w4["queue4_echo_vs_queue4"] == pytest.approx(w4["queue4_echo_pairs_per_s"] / w4["queue4_pairs_per_s"])
    # every round's steps, each with the cores other processes used during it (--quick: one round, none made again)
    (steps,) = w4["round_steps"]
    assert set(steps) == {"queue4_echo", "queue4", "workers4", "queue4_service", "raw", "counted"} and steps["counted"]
    assert steps["workers4"]["rate"] == pytest.approx(w4["workers4_pairs_per_s"], abs=0.1)
    assert steps["workers4"]["others_cores"] >= 0 and w4["cpu"]["excluded_rounds"] == 0
    row = next(r for r in doc["results"] if r["name"] == "workers4_vs_queue4")
    assert "alone in 4 processes" in row["absolute"] and "workers4_vs_raw" in row["absolute"]
    assert "workers4_vs_queue4_service" in row["absolute"] and "queue4_echo_vs_queue4" in row["absolute"]
    assert row["value"] == pytest.approx(w4["workers4_vs_queue4"], abs=0.001)
    assert doc["measurements"]["check_1m"]["events"] > 1000
    assert "PASS" in proc.stdout or "MISS" in proc.stdout


def test_make_bench_records_make_tests_log_beside_the_figures_and_the_cpu_others_used(tmp_path):
    """``make bench``'s command: the figures, the suite's time from make test's log (with its commit, this
    checkout's: not stale), and for each row the CPU other processes used meanwhile and whether that was quiet."""
    from tests.unit.test_bench_timing import LOG

    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    log = tmp_path / "test-log.txt"
    log.write_text(f"# make test: commit {commit}, started 2026-12-03T19:00:00+0000\n" + LOG)
    out = tmp_path / "bench.json"
    proc = takeover("bench", "--quick", "--only", "history_overhead", "--with-suite-log", str(log), "--out", str(out),
                    timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["commit"] == commit and doc["suite"]["commit"] == commit and "stale" not in doc["suite"]
    assert doc["suite"]["wall_s"] == 498.12 and len(doc["suite"]["slowest"]) == 3
    (row,) = doc["results"]
    cpu = row["cpu"]
    assert cpu["cpus"] >= 1 and cpu["bench_cores"] > 0 and cpu["others_cores"] >= 0 and row["quiet"] == cpu["quiet"]
    assert doc["measurements"]["history_overhead"]["cpu"] == cpu
    # a log cut off before pytest's summary: skipped with one line, the figures written all the same
    log.write_text(LOG.rsplit("\n", 2)[0])
    proc = takeover("bench", "--quick", "--only", "history_overhead", "--with-suite-log", str(log), "--out", str(out),
                    timeout=60)  # fmt: skip
    assert proc.returncode == 0 and "the suite's time not recorded" in proc.stderr and "Traceback" not in proc.stderr
    assert json.loads(out.read_text())["suite"]["wall_s"] == 498.12  # the earlier one kept


def test_bad_out_is_one_line_exit_2(tmp_path):
    proc = takeover("bench", "--quick", "--out", str(tmp_path))
    assert proc.returncode == 2
    assert "is a directory" in proc.stderr and "Traceback" not in proc.stderr
    proc = takeover("bench", "--quick", "--out", str(tmp_path / "missing" / "b.json"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


@pytest.mark.needs_package("nodejs", "npm")
@pytest.mark.needs_node_for("sqlite.js")  # the JavaScript reference on SQLite: better-sqlite3
def test_bridge_vs_native_runs_on_sqlite_when_asked(tmp_path):
    """On SQLite the JavaScript reference queue is measured only by name; the figure says its database."""
    out = tmp_path / "bench.json"
    proc = takeover("bench", "--quick", "--only", "bridge_vs_native", "--out", str(out), timeout=60)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert [r["name"] for r in doc["results"]] == ["bridge_vs_native"]
    fig = doc["measurements"]["bridge_vs_native"]
    assert fig["db"] == "sqlite" and fig["bridge_pairs_per_s"] > 0 and fig["native_pairs_per_s"] > 0
    assert "per_call_overhead_us" in fig and "on sqlite" in doc["results"][0]["absolute"]
