"""Real runs with power losses: the reference queue with synchronous=NORMAL loses acknowledged commits
and the checker says which promises broke; with synchronous=FULL the same run stays VALID.

Two short runs of the same plan (4 s, up to one power loss a second, each once a finish was accepted
since the last, no other fault), started together to
keep the wall time down. The layer alone, on a mount without a run, is tested in
tests/system/test_powerloss_layer.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from takeover._internal import store
from tests.helpers.attempts import ATTEMPTS, until_shown
from tests.helpers.processes import (
    REPO,
    child_env,
    reap_stragglers,
    records,
    start_takeover,
    stop_and_reap,
    wait_no_stragglers,
)

# The runs may be made up to ATTEMPTS times (see the fixture): the first test waits for all of them.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(60 + 130 * ATTEMPTS), pytest.mark.needs_package("fuse3")]

QUEUES = {"normal": "takeover.queues.sqlite_lease:SQLiteLeaseQueue",
          "full": "takeover.queues.sqlite_lease:SQLiteLeaseQueueFull"}
SEED = 5
ARGS = ("stress", "--profile", "smoke", "--no-faults", "--workers", "2", "--tasks", "40", "--duration", "4",
        "--power-loss-rate", "1")


def _without_power_loss(runs: dict) -> str | None:
    """A run with no power loss (none is cut before a finish was accepted, and on a loaded machine the
    workers may accept none in the 4 s), if any."""
    for name, (run_dir, *_) in runs.items():
        if not any(r["f"] == "power_loss" and r["type"] == "ok" for r in records(run_dir)):
            return f"power loss in the {name} run"
    return None


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Both runs with seed 5, made again with the next seed (up to ATTEMPTS times) while one of them
    had no power loss at all; the tests read the first pair where both had one, else the last."""
    base = tmp_path_factory.mktemp("powerloss")

    def run(attempt: int) -> dict:
        procs: dict[str, subprocess.Popen] = {}
        dirs = {name: base / f"{name}{attempt}" for name in QUEUES}
        try:
            for name, queue in QUEUES.items():
                procs[name] = subprocess.Popen([sys.executable, "-m", "takeover", *ARGS, "--seed", str(SEED + attempt),
                                                "--queue", queue, "--out", str(dirs[name])], cwd=REPO,
                                               env=child_env(), text=True, stdout=subprocess.PIPE,
                                               stderr=subprocess.PIPE)  # fmt: skip
            out = {name: (p.wait(timeout=120), *p.communicate()) for name, p in procs.items()}
        finally:
            for name, p in procs.items():
                if p.poll() is None:
                    p.kill()
                reap_stragglers(dirs[name])
        return {name: (dirs[name], *out[name]) for name in QUEUES}

    return until_shown(run, _without_power_loss)


def _summary(run_dir):
    return json.loads((run_dir / store.SUMMARY_FILE).read_text())


def test_normal_loses_acknowledged_commits_and_says_which_promises_broke(runs):
    run_dir, code, stdout, stderr = runs["normal"]
    assert code == 1, stdout + stderr
    s = _summary(run_dir)
    pl = s["power_loss"]
    assert 1 <= pl["losses"] <= 4 and pl["violations"] > 0
    assert pl["reclaims"] + pl["reused_generations"] > 0, pl
    assert {e["pattern"] for e in s["diagnosis"]} == {"power_loss"}, s["diagnosis"]
    assert "promises broken across them:" in stdout
    assert "power loss" in s["diagnosis"][0]["sentence"]


def test_full_survives_the_same_power_losses(runs):
    run_dir, code, stdout, stderr = runs["full"]
    assert code == 0, stdout + stderr
    pl = _summary(run_dir)["power_loss"]
    assert 1 <= pl["losses"] <= 4 and pl["violations"] == 0
    assert "no promise broken" in stdout


@pytest.mark.parametrize("name", list(QUEUES))
def test_each_power_loss_is_recorded_and_the_layer_is_gone_after_the_run(runs, name):
    run_dir = runs[name][0]
    recs = records(run_dir)
    pl = [r for r in recs if r["f"] == "power_loss"]
    assert len(pl) >= 2 and [r["type"] for r in pl] == ["invoke", "ok"] * (len(pl) // 2)
    # each came once a finish was accepted since the one before (or since the faulted phase began)
    starts = [r["time"] for r in recs if r["f"] == "run" and r.get("value") == "start"] + [
        r["time"] for r in pl if r["type"] == "ok"]
    for begin, cut in zip(starts, [r["time"] for r in pl if r["type"] == "invoke"], strict=False):
        assert any(begin < r["time"] < cut for r in recs if r["f"] == "finish" and r["type"] == "ok")
    killed = [r for r in recs if r["f"] == "exit" and r.get("detail") == "power_loss"]
    assert len(killed) == sum(r["workers"] for r in pl if r["type"] == "invoke") > 0
    assert all(r["value"] == "-9" for r in killed)
    assert (run_dir / store.QUEUE_FILE).is_file()
    assert not (run_dir / store.POWERLOSS_MOUNT).exists() and not (run_dir / store.POWERLOSS_DISK).exists()
    assert not any(os.path.ismount(p) for p in run_dir.iterdir())
    assert not wait_no_stragglers(run_dir, timeout=5)


def _until(condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_the_mount_goes_when_takeover_is_killed(tmp_path: Path):
    """SIGKILL of the coordinator: the layer's process gets SIGTERM from the kernel and unmounts by itself.
    Ctrl-C takes the run's ``finally``, the same path as the runs above, whose layer is gone at their end."""
    run_dir = tmp_path / "run"
    mount = run_dir / store.POWERLOSS_MOUNT
    proc = start_takeover("stress", "--profile", "smoke", "--no-faults", "--duration", "60", "--power-loss-rate", "0.5",
                          "--out", str(run_dir))  # fmt: skip
    try:
        assert _until(lambda: os.path.ismount(mount), 60), proc.stderr.read() if proc.poll() is not None else ""
        proc.kill()
        proc.wait(timeout=10)
        assert _until(lambda: not os.path.ismount(mount), 15)
        assert not wait_no_stragglers(run_dir, timeout=10)
    finally:
        stop_and_reap(proc, run_dir)
