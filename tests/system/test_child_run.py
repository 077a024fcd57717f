"""takeover.child_run stops a child run however its wait ends, and leaves none of its processes behind.

Why here as well as through its callers (the API's interrupt in test_pytest_plugin.py, the fan-out's
cancel in test_fanout.py): each caller picks a different way to stop (:class:`Stop`), and each way must reap
what the run started: its tree for a child of the caller's session, its process group and every process
carrying its run folder (takeover.lifeline) for a child of its own session. Real processes, real signals.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from takeover.child_run import ChildRun, Stop
from takeover.lifeline import RUN_ENV

# A run that ignores SIGTERM and SIGINT and starts a grandchild that does too; it prints the grandchild's pid.
STUBBORN = """
import signal, subprocess, sys, time
for s in (signal.SIGTERM, signal.SIGINT):
    signal.signal(s, signal.SIG_IGN)
kid = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                        "signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(120)"], start_new_session=NEW)
print(kid.pid, flush=True)
time.sleep(120)
"""


def _pids(run: ChildRun) -> list[int]:
    deadline = time.monotonic() + 30
    while not run.stdout.strip() and time.monotonic() < deadline:
        time.sleep(0.05)
    return [run.proc.pid, int(run.stdout.split()[0])]


@pytest.fixture
def started():
    """The pids a test's runs started, SIGKILLed afterwards whatever the test concluded."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            psutil.Process(pid).kill()


def _gone(pids: list[int]) -> bool:
    return not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in pids)


def test_a_run_no_longer_wanted_is_stopped_with_its_tree(started):
    run = ChildRun([sys.executable, "-c", STUBBORN.replace("NEW", "False")], Stop(signal.SIGTERM, 0.5))
    pids = _pids(run)
    started += pids
    assert run.wait(wanted=lambda: False) is True
    assert _gone(pids), "the run and its grandchild, both deaf to SIGTERM, are killed after the grace"
    assert run.returncode == -signal.SIGKILL


def test_a_deadline_stops_the_run_then_raises(started):
    run = ChildRun([sys.executable, "-c", STUBBORN.replace("NEW", "False")], Stop())
    pids = _pids(run)
    started += pids
    with pytest.raises(subprocess.TimeoutExpired):
        run.wait(timeout=0.5)
    assert _gone(pids)


def test_a_run_of_its_own_session_is_swept_by_its_run_folder(tmp_path: Path, started):
    """The grandchild left the run's process group (a session of its own): the sweep by TAKEOVER_RUN_DIR
    finds it; a process of another run folder is left alone."""
    run_dir = tmp_path / "run"
    env = {**psutil.Process().environ(), RUN_ENV: str(run_dir)}
    other = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)"], env={**env, RUN_ENV: str(tmp_path / "other")}
    )
    try:
        run = ChildRun(
            [sys.executable, "-c", STUBBORN.replace("NEW", "True")],
            Stop(signal.SIGINT, 0.5, run_dir),
            env=env,
            session=True,
        )
        pids = _pids(run)
        started += pids
        with pytest.raises(subprocess.TimeoutExpired):
            run.wait(timeout=0.5)
        deadline = time.monotonic() + 5
        while not _gone(pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(pids)
        assert other.poll() is None, "another run's process is not this run's to kill"
    finally:
        other.kill()
        other.wait()
