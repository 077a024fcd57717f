"""takeover._internal.child_run stops a child run however its wait ends, and leaves none of its processes behind.

Why here as well as through its callers (the API's interrupt in test_pytest_plugin.py, the fan-out's
cancel in test_fanout.py): each caller picks a different way to stop (:class:`Stop`), and each way must reap
what the run started: its tree for a child of the caller's session, its process group and every process
carrying its run folder (takeover._internal.lifeline) for a child of its own session. Real processes, real signals.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from takeover._internal.child_run import ChildRun, Stop, stop_all
from takeover._internal.lifeline import RUN_ENV
from tests.helpers.processes import child_env

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


def test_a_run_in_a_child_dies_with_its_caller_when_the_caller_is_sigkilled(tmp_path: Path, started):
    """stress_command (the selftest's and the detection bench's runs): its caller SIGKILLed cannot stop the
    run, so the kernel kills it at once (takeover._internal.lifeline), and its workers die with the run: no process of
    it is left. Watched from a subreaper, which inherits the orphaned run and so sees how it ended: killed by
    SIGKILL, not ended later on its own (without the guard it ran on until its next write to the caller's
    closed pipe failed, and exited)."""
    run_dir = tmp_path / "run"
    watch = subprocess.run([sys.executable, "-c", SUBREAPER, str(run_dir)], env=child_env(), capture_output=True,
                           text=True, timeout=180)  # fmt: skip
    for line in watch.stdout.splitlines():
        if line.startswith("pid "):
            started.append(int(line.split()[1]))
    assert watch.returncode == 0, watch.stdout + watch.stderr[-3000:]
    ended = json.loads(watch.stdout.splitlines()[-1])
    assert ended["run"] == -signal.SIGKILL, ended
    assert ended["left"] == [], ended


# A caller of stress_command: one long run of the reference queue.
CALLER = """
import sys
import threading
from pathlib import Path
from takeover._internal.child_run import stress_command
stress_command("takeover.queues.sqlite_lease:SQLiteLeaseQueue", 1, "smoke", Path(sys.argv[1]), ("--duration", "120"))
"""

# A subreaper (PR_SET_CHILD_SUBREAPER): starts the caller, SIGKILLs it once the run is under way, then reaps
# the orphaned run and its workers itself; prints the run's wait status (negative: the signal that ended it)
# and any pid still unreaped after 30 s.
SUBREAPER = """
import ctypes, json, os, signal, subprocess, sys, time
from pathlib import Path
import psutil
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)
run_dir = Path(sys.argv[1])
caller = subprocess.Popen([sys.executable, "-c", CALLER, str(run_dir)])
deadline = time.monotonic() + 60
while not (run_dir / "history.jsonl").exists() and time.monotonic() < deadline:
    time.sleep(0.1)
time.sleep(1)
tree = psutil.Process(caller.pid).children(recursive=True)
run = psutil.Process(caller.pid).children()[0].pid
for p in tree:
    print("pid", p.pid, flush=True)
os.kill(caller.pid, signal.SIGKILL)
caller.wait()
statuses, deadline = {}, time.monotonic() + 30
while time.monotonic() < deadline and len(statuses) < len(tree):
    try:
        pid, status = os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        break
    if pid == 0:
        time.sleep(0.05)
        continue
    statuses[pid] = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
left = [p.pid for p in tree if p.pid not in statuses and psutil.pid_exists(p.pid)]
print(json.dumps({"run": statuses.get(run), "left": left}))
""".replace("CALLER", repr(CALLER))


def test_stop_all_stops_the_runs_other_threads_wait_for(started):
    """The detection bench waits for its runs in a thread pool, which an interrupt of the main thread does not
    reach: stop_all stops each run still waited for, with its tree, and each wait returns."""
    runs = [ChildRun([sys.executable, "-c", STUBBORN.replace("NEW", "False")], Stop(signal.SIGTERM, 0.5))
            for _ in range(2)]  # fmt: skip
    pids = [pid for run in runs for pid in _pids(run)]
    started += pids
    waits = [threading.Thread(target=run.wait) for run in runs]
    for t in waits:
        t.start()
    stop_all()
    for t in waits:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in waits), "a wait did not return"
    assert _gone(pids)
    assert [run.returncode for run in runs] == [-signal.SIGKILL] * 2
