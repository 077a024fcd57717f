"""``takeover bench`` ends cleanly however it is ended: Ctrl-C mid-measurement, SIGKILL of the bench alone or
of its whole process group.

Each test starts a real ``takeover bench --quick --only workers4_vs_raw`` (Ctrl-C: also ``--only
detection``) with ``TMPDIR`` pointed at its own ``tmp_path`` (so the bench's temporary folders, and every
process it starts, are the test's to find), waits until a real stress run of the measurement has its workers
claiming (its history holds a claim: the moment a Ctrl-C was lost, because the run's supervisor took it for
its own stop request; for detection, the moment its runs' orphaned workers held the bench's exit until init
reaped them), then signals. workers4_vs_raw is the measurement that starts the most processes (the stress
run's 4 workers and service, the 4 queue processes with their service or echo peer), and the only one that
runs a stress run in the bench's process.
Unit tests of the janitor itself: tests/system/test_endings.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from takeover._internal.commands.bench import SCRATCH_PREFIX
from takeover._internal.lifeline import RUN_ENV
from takeover._internal.scratch import OWNER, temp_root
from takeover.exit_codes import ExitCode
from tests.helpers.processes import child_env, start_takeover

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

# Seconds from Ctrl-C to the bench's exit: what a user waits for. Measured 0.14-0.53 s (load 5.6); 3.6-4.1 s
# when the detection runs' orphaned workers were waited for until init reaped them (takeover._internal.child_run._kill).
STOP_BOUND = 2.0
GONE_BOUND = 10.0  # seconds after a SIGKILL for its children to die and the janitor to remove the folder


def _theirs(tmp_path: Path) -> list[psutil.Process]:
    """Live processes the bench started: everything it starts inherits TMPDIR (the test's folder, or the
    bench's scratch folder in it), and a stress run's children carry TAKEOVER_RUN_DIR in it too."""
    mine = str(tmp_path)
    found = []
    for proc in psutil.process_iter():
        try:
            env = proc.environ()
            if (env.get("TMPDIR", "").startswith(mine) or env.get(RUN_ENV, "").startswith(mine)) \
                    and proc.status() != psutil.STATUS_ZOMBIE:  # fmt: skip
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


# The measurements that make stress runs, and where their runs' histories are: workers4_vs_raw's in the bench's
# own process, detection's in child processes (takeover._internal.child_run), two at a time.
HISTORIES = {"workers4_vs_raw": "**/run0/try0/history.jsonl", "detection": "**/takeover-detection-*/*/history.jsonl"}


def _env(tmp_path: Path) -> dict[str, str]:
    return {**child_env(), "TMPDIR": str(tmp_path)}


def _start_bench(tmp_path: Path, only: str = "workers4_vs_raw"):
    return start_takeover("bench", "--quick", "--only", only, "--out", str(tmp_path / "bench.json"),
                          env=_env(tmp_path))  # fmt: skip


def _wait_stress_run_claiming(tmp_path: Path, proc, only: str = "workers4_vs_raw", timeout: float = 60.0) -> None:
    """Until a worker of the measurement's stress run has claimed a task (its history says so)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        for history in tmp_path.glob(HISTORIES[only]):
            for line in history.read_text().splitlines():
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if rec.get("f") == "claim" and rec.get("type") == "ok":
                    return
        time.sleep(0.05)
    pytest.fail("the stress run's workers never claimed")


def _wait_gone(tmp_path: Path, children: list[psutil.Process] = (), *,
               folders_too: bool = True) -> tuple[list[psutil.Process], list[Path]]:  # fmt: skip
    """Until no process of the bench is alive and (``folders_too``) its scratch folder is gone (at most
    GONE_BOUND s): what is left then. ``children``: the bench's descendants seen while it ran, whatever their
    environment."""
    deadline = time.monotonic() + GONE_BOUND
    while True:
        alive = [c for c in children if _alive(c)]
        left = alive + [p for p in _theirs(tmp_path) if p not in alive]
        folders = list(tmp_path.glob(f"{SCRATCH_PREFIX}*"))
        if (not left and not (folders and folders_too)) or time.monotonic() > deadline:
            return left, folders
        time.sleep(0.1)


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _cmdline(proc: psutil.Process) -> list[str]:
    try:
        return proc.cmdline()
    except psutil.Error:
        return []


def _described(procs: list[psutil.Process]) -> list[tuple[int, int, str]]:
    out = []
    for p in procs:
        try:
            out.append((p.pid, p.ppid(), " ".join(p.cmdline())[:200]))
        except psutil.Error:
            continue
    return out


def _kill_all(procs: list[psutil.Process]) -> None:
    for p in procs:
        try:
            if _alive(p):
                p.kill()
        except psutil.NoSuchProcess:
            pass


@pytest.mark.parametrize("only", list(HISTORIES))
def test_ctrl_c_mid_measurement_stops_the_bench_with_its_children_and_folders(tmp_path, only):
    proc = _start_bench(tmp_path, only)
    children: list[psutil.Process] = []
    try:
        _wait_stress_run_claiming(tmp_path, proc, only)
        children = psutil.Process(proc.pid).children(recursive=True)
        assert len(children) >= 5, children  # a run's 4 workers and its service at least
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C on a terminal sends: the whole foreground group
        signalled = time.monotonic()
        try:
            _out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail("the bench went on after Ctrl-C")
        took = time.monotonic() - signalled
        assert proc.returncode == ExitCode.INTERRUPTED, err
        assert took < STOP_BOUND, f"{took:.1f} s from Ctrl-C to the exit"
        assert err.strip().splitlines()[-1] == "takeover: interrupted", err
        assert "Traceback" not in err, err
        assert not (tmp_path / "bench.json").exists()  # nothing measured, nothing written
        # Its scratch folder is gone as it leaves (its with block removes it; the janitor only after a SIGKILL).
        assert list(tmp_path.glob(f"{SCRATCH_PREFIX}*")) == []
        # Every process it started is gone a moment later: the janitor (takeover._internal.scratch) and
        # multiprocessing's resource tracker leave when they read the end of their pipe from the bench.
        left, _ = _wait_gone(tmp_path, children)
        assert left == [], _described(left)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        _kill_all(_theirs(tmp_path) + children)


# The group's SIGKILL (8 s) is nightly: its processes die by the kernel's hand, and the janitor it relies on
# for the folder is the one the bench's own SIGKILL tests (a session of its own, out of the group's reach).
@pytest.mark.parametrize("whom", ["bench", pytest.param("group", marks=pytest.mark.nightly)])
def test_sigkill_of_the_bench_leaves_no_process_and_no_folder(tmp_path, whom):
    proc = _start_bench(tmp_path)
    children: list[psutil.Process] = []
    try:
        _wait_stress_run_claiming(tmp_path, proc)
        children = psutil.Process(proc.pid).children(recursive=True)
        assert len(children) >= 5 and list(tmp_path.glob(f"{SCRATCH_PREFIX}*")), children
        if whom == "group":
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        left, folders = _wait_gone(tmp_path, children)
        assert left == [], _described(left)
        assert folders == []  # removed by the janitor the bench started (takeover._internal.scratch)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        _kill_all(_theirs(tmp_path) + children)


def test_the_next_bench_removes_the_folder_of_a_bench_killed_with_its_janitor(tmp_path, monkeypatch):
    """Where the janitor dies too (a cgroup killed whole: a cancelled CI job), the folder stays; the next bench
    finds it unowned (its lock file can be taken) and removes it, and leaves a live owner's folder alone (this
    test's own, made the same way)."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    proc = None
    children: list[psutil.Process] = []
    with temp_root(SCRATCH_PREFIX) as mine:
        try:
            # Any bench will do; this one is killed while check_1m's child measures in a child of its own (the
            # grandchild of the bench), which the janitor's removal of their files no longer ends.
            proc = start_takeover("bench", "--quick", "--repeat", "40", "--only", "check_1m", "--out",
                                  str(tmp_path / "bench.json"), env=_env(tmp_path))  # fmt: skip
            deadline = time.monotonic() + 30
            while proc.poll() is None and time.monotonic() < deadline:
                children = psutil.Process(proc.pid).children(recursive=True)
                if any("VmHWM" in " ".join(_cmdline(c)) for c in children):
                    break
                time.sleep(0.02)
            assert list(tmp_path.glob(f"{SCRATCH_PREFIX}*/{OWNER}")) and len(children) >= 3, _described(children)
            janitors = [c for c in children if "takeover-janitor" in _cmdline(c)]
            assert janitors, _described(children)
            for p in janitors:
                p.kill()
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
            (stale,) = set(tmp_path.glob(f"{SCRATCH_PREFIX}*")) - {Path(mine)}
            left, _ = _wait_gone(tmp_path, children, folders_too=False)
            assert left == [] and stale.is_dir(), _described(left)  # the processes died; the folder stayed
            nxt = subprocess.run([*proc.args[:3], "bench", "--quick", "--only", "history_overhead", "--out",
                                  str(tmp_path / "next.json")], env=_env(tmp_path), capture_output=True, text=True,
                                 timeout=60)  # fmt: skip
            assert nxt.returncode == 0, nxt.stderr
            assert not stale.exists()
            assert Path(mine).is_dir()
        finally:
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            _kill_all(_theirs(tmp_path) + children)
