"""``takeover sweep``: a tiny grid of real stress runs yields a complete CSV and report; a queue
bug in any cell is reported loudly; the model's predictions match the worker's own draws."""

from __future__ import annotations

import csv
import random
import sys
from pathlib import Path

import pytest

from harness.config import TaskTime
from harness.sweep.grid import load_grid
from harness.sweep.metrics import COLUMNS
from harness.sweep.model import quantile, survival
from workloads.worker import draw_task_time

sys.path.insert(0, str(Path(__file__).parent))
from stress_helpers import reap_stragglers, takeover  # noqa: E402

pytestmark = pytest.mark.timeout(150)

ALWAYS_FILLED = ("cell", "distribution", "lease", "remedy", "seed", "valid", "tasks", "dup_per_1000",
                 "lost_lease_per_1000", "p_outlives_model", "outlived_observed", "p99_task_model", "lease_over_p99",
                 "throughput_per_s", "wasted_attempts_pct", "performed", "run_dir")


def test_tiny_sweep_writes_a_complete_csv_and_report(tmp_path):
    out = tmp_path / "sweep"
    try:
        proc = takeover("sweep", "--grid", "workloads/sweep-tiny", "--out", str(out), timeout=140)
    finally:
        for cell in (out / "cells").glob("*"):
            reap_stragglers(cell)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    grid = load_grid("sweep-tiny")
    with open(out / "sweep.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(grid.runs()) and list(rows[0]) == COLUMNS
    assert {r["cell"] for r in rows} == {c.cell_id for c in grid.cells()}
    for r in rows:
        assert all(r[k] != "" for k in ALWAYS_FILLED), r
        assert r["valid"] == "True"
        assert (Path(r["run_dir"]) / "summary.json").is_file()
    # Heartbeat cells really extended leases; fixed-lease cells never did.
    assert all(int(r["extends_ok"]) == 0 for r in rows if r["heartbeat_fraction"] == "0.0")
    assert any(int(r["extends_ok"]) > 0 for r in rows if r["heartbeat_fraction"] != "0.0")
    md = (out / "sweep.md").read_text()
    assert "## Recommendation" in md
    for d in grid.distributions:
        assert f"| {d.name} |" in md
    html = (out / "sweep.html").read_text()
    assert html.count("<img") == 4 and "data:image/png;base64," in html
    assert "[sweep 8/8" in proc.stderr  # plain progress lines when not on a terminal


def test_a_queue_bug_in_a_cell_is_reported_loudly(tmp_path):
    out = tmp_path / "bug"
    try:
        proc = takeover("sweep", "--grid", "sweep-tiny", "--out", str(out), "--lease", "0.25",
                        "--mode", "none", "--queue", "harness.queues.planted:StealsLiveLeases", timeout=140)
    finally:
        for cell in (out / "cells").glob("*"):
            reap_stragglers(cell)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "INVARIANT VIOLATED" in proc.stderr
    assert "**INVARIANT VIOLATIONS**" in (out / "sweep.md").read_text()


@pytest.mark.parametrize("args, words", [
    (("--grid", "no-such-grid"), "unknown sweep grid"),
    (("--lease", "0,1"), "--lease"),
    (("--mode", "none+hb1.5"), "heartbeat"),
    (("--seeds", "0"), "--seeds"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, words):
    proc = takeover("sweep", "--out", str(tmp_path / "x"), *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and words in proc.stderr
    assert not (tmp_path / "x").exists()


def test_dry_run_lists_every_run(tmp_path):
    proc = takeover("sweep", "--grid", "sweep-default", "--dry-run", "--seeds", "3", "--out", str(tmp_path / "d"))
    assert proc.returncode == 0
    assert f"{len(load_grid('sweep-default').cells()) * 3} run(s)" in proc.stdout


@pytest.mark.parametrize("tt", [TaskTime("lognormal", 0.08, 0.5, 0.0), TaskTime("pareto", 0.08, 1.5, 0.0),
                                TaskTime("exponential", 0.1, 0.0, 0.0), TaskTime("uniform", 0.3, 0.5, 0.0),
                                TaskTime("pareto", 0.08, 1.5, 0.5)])
def test_model_matches_the_workers_draws(tt):
    rng = random.Random(5)
    draws = sorted(draw_task_time(rng, tt) for _ in range(40000))
    for q in (0.5, 0.9, 0.99):
        x = draws[int(q * len(draws))]
        assert abs(survival(tt, x) - (1 - q)) < 0.01 + 0.05 * (1 - q), (tt, q, x)
    if tt.max == 0:
        assert abs(quantile(tt, 0.99) - draws[int(0.99 * len(draws))]) < 0.15 * quantile(tt, 0.99)
