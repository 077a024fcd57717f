"""``takeover hunt`` on real processes: it finds a planted bug, passes the reference queue, stops on Ctrl-C.

Short hunts on the ``smoke`` profile (runs of 1-3 s of faults). Assertions are on what the hunt
printed and left behind (hunt.json, the run folders and their config.json), never on timing; every
test reaps whatever a run could have left. tests/unit/test_swarm.py covers the swarm draw itself.
"""

from __future__ import annotations

import argparse
import json
import shlex
import signal
import subprocess
from pathlib import Path

import pytest

from takeover._internal.commands import stress
from takeover._internal.config import RunConfig
from tests.helpers.processes import (
    reap_stragglers,
    records,
    start_takeover,
    stop_and_reap,
    stragglers,
    takeover,
    wait_for_record,
)

PLANTED = "takeover.queues.planted:StealsLiveLeases"  # lease_exclusive breaks within a second or two


def _hunt_json(root: Path) -> dict:
    return json.loads((root / "hunt.json").read_text())


def _run_dirs(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir()) if root.exists() else []


def _hunt(root: Path, *args: str) -> subprocess.CompletedProcess:
    """A whole hunt into ``root``; whatever its runs could have left is reaped, whatever happened."""
    try:
        return takeover("hunt", *args, "--out", str(root), timeout=110)
    finally:
        for run_dir in _run_dirs(root):
            reap_stragglers(run_dir)


def _reproduced(command: str) -> RunConfig:
    """What ``takeover stress`` resolves the line to, without running it."""
    parser = argparse.ArgumentParser()
    stress.configure(parser)
    argv = shlex.split(command)
    assert argv[:2] == ["takeover", "stress"]
    return stress.resolve(parser.parse_args(argv[2:]))


def _stored(run_dir: Path) -> RunConfig:
    return RunConfig.from_dict({**json.loads((run_dir / "config.json").read_text()), "out": None})


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_hunt_finds_a_planted_bug_and_prints_how_to_reproduce_it(tmp_path: Path):
    root = tmp_path / "hunt"
    proc = _hunt(root, "--queue", PLANTED, "--profile", "smoke", "--run-seconds", "3", "--budget", "90")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    hunt = _hunt_json(root)
    found = hunt["found"]
    assert hunt["status"] == "finished" and hunt["verdict"] == "invalid" and hunt["exit_code"] == 1
    assert "lease_exclusive" in found["violated"]
    assert found["seed"] == hunt["runs"][-1]["seed"], "the hunt stops at the first violation"
    assert all(r["verdict"] == "valid" for r in hunt["runs"][:-1])
    assert found["first_violation_s"] is not None and 0 <= found["first_violation_s"] <= 60
    assert found["detected_after_s"] > 0
    run_dir = Path(found["run_dir"])
    assert run_dir == root / f"seed-{found['seed']}"
    assert (run_dir / "report.md").exists() and (run_dir / "summary.json").exists(), "the violating run is kept"
    lines = proc.stdout.splitlines()
    reproduce = [line for line in lines if line.startswith("reproduce with: ")]
    assert reproduce == [f"reproduce with: {found['command']}"]
    assert f"run folder: {run_dir}" in lines
    assert any(line.startswith("violated: lease_exclusive") for line in lines)
    assert _reproduced(found["command"]) == _stored(run_dir), "the printed line gives the run's config"


@pytest.mark.nightly
@pytest.mark.slow
@pytest.mark.timeout(120)
def test_hunt_on_the_reference_queue_alternates_aimed_and_swarm_and_exits_0(tmp_path: Path):
    root = tmp_path / "hunt"
    proc = _hunt(root, "--profile", "smoke", "--tasks", "30", "--run-seconds", "1", "--budget", "16", "--seed", "5",
                 "--keep-valid", "1")  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    hunt = _hunt_json(root)
    runs = hunt["runs"]
    assert len(runs) >= 2, runs
    assert [r["seed"] for r in runs] == list(range(5, 5 + len(runs)))
    assert [r["mode"] for r in runs] == ["aimed", "swarm"] * (len(runs) // 2) + ["aimed"] * (len(runs) % 2)
    assert all(r["verdict"] == "valid" for r in runs) and hunt["found"] is None and hunt["exit_code"] == 0
    assert sum(1 for line in proc.stdout.splitlines() if line.startswith("[hunt ")) == len(runs), "a line per run"
    assert "no violation" in proc.stdout
    # Only the last valid run is kept; hunt.json keeps every row.
    assert [r["kept"] for r in runs] == [False] * (len(runs) - 1) + [True]
    assert _run_dirs(root) == [Path(runs[-1]["run_dir"])]
    assert hunt["elapsed_s"] <= 16 + max(r["wall_s"] for r in runs), "no run started that could not fit"
    # Every run's line reproduces it; the swarm run records its draw.
    last = Path(runs[-1]["run_dir"])
    stored = _stored(last)
    assert _reproduced(runs[-1]["command"]) == stored
    assert stored.swarm is (runs[-1]["mode"] == "swarm")
    swarm_rows = [r for r in runs if r["mode"] == "swarm"]
    aimed_rows = [r for r in runs if r["mode"] == "aimed"]
    for r in swarm_rows:
        cfg = _reproduced(r["command"])
        assert cfg.swarm and {k: v for k, v in cfg.faults.items() if v > 0} == r["mix"]
    assert all("--swarm" not in shlex.split(r["command"]) for r in aimed_rows)
    assert swarm_rows[0]["mix"] != aimed_rows[0]["mix"]


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_ctrl_c_stops_the_run_under_way_reaps_it_and_exits_130(tmp_path: Path):
    root = tmp_path / "hunt"
    proc = start_takeover("hunt", "--profile", "smoke", "--run-seconds", "20", "--budget", "60", "--out", str(root))
    try:
        assert wait_for_record(root / "seed-1", lambda r: r.get("value") == "start"), proc.poll()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        stop_and_reap(proc, *_run_dirs(root))
    assert proc.returncode == 130, out + err
    hunt = _hunt_json(root)
    assert hunt["status"] == "interrupted" and hunt["exit_code"] == 130
    assert [r["verdict"] for r in hunt["runs"]] == ["interrupted"]
    assert any(r.get("value") == "interrupted" for r in records(root / "seed-1")), "the run was stopped as a run"
    assert "takeover check" in out
    assert stragglers(root / "seed-1") == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--budget", "0"], "--budget must be a number of seconds at least --run-seconds"),
        (["--budget", "5", "--run-seconds", "10"], "--budget must be a number of seconds at least --run-seconds"),
        (["--run-seconds", "-1"], "--run-seconds must be a positive number"),
        (["--keep-valid", "-1"], "--keep-valid must be an integer >= 0"),
        (["--lease", "0"], "lease must be a positive number"),
        (["--queue", "no_such_module:Queue"], "no_such_module"),
        (["--profile", "no-such-profile"], "unknown profile 'no-such-profile'"),
        (["--budget", "abc"], "argument --budget: invalid float value"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_and_nothing_runs(tmp_path: Path, args: list[str], message: str):
    root = tmp_path / "hunt"
    proc = takeover("hunt", *args, "--out", str(root), timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert not root.exists(), "bad input creates nothing"


def test_an_out_folder_in_use_is_refused(tmp_path: Path):
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "file").write_text("x")
    proc = takeover("hunt", "--out", str(tmp_path / "used"), timeout=60)
    assert proc.returncode == 2 and "already exists and is not empty" in proc.stderr
