"""``takeover sweep``: a tiny grid of real stress runs yields a complete CSV and report; a queue
bug in any cell is reported loudly; the model's predictions match the worker's own draws."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from takeover._internal.sweep.grid import load_grid
from takeover._internal.sweep.metrics import COLUMNS
from takeover._internal.sweep.wilson import tasks_needed
from tests.helpers.processes import reap_stragglers, takeover

pytestmark = pytest.mark.timeout(150)


ALWAYS_FILLED = ("cell", "distribution", "lease", "remedy", "seed", "valid", "tasks", "dup_per_1000",
                 "lost_lease_per_1000", "p_outlives_model", "outlived_observed", "p99_task_model", "lease_over_p99",
                 "throughput_per_s", "wasted_attempts_pct", "performed", "run_dir",
                 "dup_per_1000_lo", "dup_per_1000_hi", "lost_lease_per_1000_lo", "lost_lease_per_1000_hi",
                 "s5_per_1000_lo", "s5_per_1000_hi")


@pytest.mark.nightly
@pytest.mark.slow
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
        for rate in ("dup_per_1000", "lost_lease_per_1000", "s5_per_1000"):  # bounds bracket the estimate
            assert float(r[f"{rate}_lo"]) <= float(r[rate]) <= float(r[f"{rate}_hi"]), (rate, r)
        assert float(r["lost_lease_per_1000_hi"]) > 0  # never certainty from a few dozen tasks
    # Heartbeat cells really extended leases; fixed-lease cells never did.
    assert all(int(r["extends_ok"]) == 0 for r in rows if r["heartbeat_fraction"] == "0.0")
    assert any(int(r["extends_ok"]) > 0 for r in rows if r["heartbeat_fraction"] != "0.0")
    md = (out / "sweep.md").read_text()
    assert "## Recommendation" in md and "95% upper" in md
    for d in grid.distributions:
        assert f"| {d.name} |" in md
    # 24 tasks per cell cannot show 20 per 1000 even at 0 observed: no lease is recommended, said plainly.
    need = tasks_needed(grid.target / 1000)
    assert f"not resolvable with {grid.fixed['tasks']} tasks per cell; needs >= {need}" in md
    assert "warning:" in proc.stderr and "not resolvable" in proc.stderr
    # The recommendation is printed once (stdout) and each warning once (stderr); sweep.md has both.
    assert proc.stdout.count("## Recommendation") == 1 and "**Warning:**" not in proc.stdout
    warned = [line.removeprefix("warning: ") for line in proc.stderr.splitlines() if line.startswith("warning: ")]
    assert warned and all((proc.stdout + proc.stderr).count(w) == 1 for w in warned)
    assert [line.removeprefix("**Warning:** ") for line in md.splitlines() if line.startswith("**Warning:**")] == warned
    html = (out / "sweep.html").read_text()
    assert html.count("<img") == 4 and "data:image/png;base64," in html
    assert "[sweep 8/8" in proc.stderr  # plain progress lines when not on a terminal


@pytest.mark.nightly
@pytest.mark.slow
def test_a_queue_bug_in_a_cell_is_reported_loudly(tmp_path):
    out = tmp_path / "bug"
    try:
        proc = takeover("sweep", "--grid", "sweep-tiny", "--out", str(out), "--lease", "0.25",
                        "--mode", "none", "--queue", "takeover.queues.planted:StealsLiveLeases", timeout=140)
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


@pytest.mark.slow
def test_dry_run_lists_every_run(tmp_path):
    proc = takeover("sweep", "--grid", "sweep-default", "--dry-run", "--seeds", "3", "--out", str(tmp_path / "d"))
    assert proc.returncode == 0
    assert f"{len(load_grid('sweep-default').cells()) * 3} run(s)" in proc.stdout
