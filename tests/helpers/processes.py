"""Shared by the system tests: run ``takeover`` as a real subprocess, read what it left, and find
any process of a run that outlived it (every child carries ``TAKEOVER_RUN_DIR``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from takeover._internal.lifeline import RUN_ENV
from tests.helpers import queues

REPO = Path(__file__).resolve().parents[2]


def takeover(*args: str, cwd: Path | None = None, timeout: float = 90, **popen) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "takeover", *args],
        cwd=cwd or REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=child_env(),
        **popen,
    )


def start_takeover(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.Popen:
    """A run in its own session, so a signal to its group is what Ctrl-C on a terminal sends (``env``: its
    environment, by default :func:`child_env`)."""
    return subprocess.Popen(
        [sys.executable, "-m", "takeover", *args],
        cwd=cwd or REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env() if env is None else env,
        start_new_session=True,
    )


def child_env() -> dict[str, str]:
    """This process's environment for a ``takeover`` child: the fixture queues importable by name,
    and no run marker inherited from a run this process may be part of (a child would otherwise be
    counted among that run's stragglers)."""
    env = queues.child_env()
    env.pop(RUN_ENV, None)
    return env


def server_child_env(server_env: str, **extra: str) -> dict[str, str]:
    """A takeover child's environment without the database server an enclosing serve() published under
    ``server_env``, plus ``extra``: a command tested for the private server it starts and removes must start it."""
    env = child_env()
    env.pop(server_env, None)
    env.update(extra)
    return env


def live_servers(name: str, owned: Callable[[psutil.Process], bool]) -> list[psutil.Process]:
    """The live (not zombie) processes called ``name`` that ``owned`` says the command under test started."""
    found = []
    for p in psutil.process_iter(["name"]):
        try:
            if p.info["name"] == name and p.status() != psutil.STATUS_ZOMBIE and owned(p):
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def wait_servers_gone(
    servers: Callable[[], list[psutil.Process]], folders: list[Path], timeout: float = 20.0
) -> list[psutil.Process]:
    """Wait until ``servers()`` lists none and none of ``folders`` exists; what ``servers()`` still lists then."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not servers() and not any(f.exists() for f in folders):
            return []
        time.sleep(0.05)
    return servers()


def records(run_dir: Path) -> list[dict]:
    """The history, tolerating a torn last line (a process killed mid-write)."""
    out = []
    path = run_dir / "history.jsonl"
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def wait_for_record(run_dir: Path, pred, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(pred(r) for r in records(run_dir)):
            return True
        time.sleep(0.1)
    return False


def stragglers(run_dir: Path, *, under: bool = False) -> list[psutil.Process]:
    """Processes whose environment marks them as part of the run in ``run_dir`` (with ``under``: of any
    run in a folder under it, for runs whose folders a test does not name, such as an inner pytest's)."""
    marker = str(Path(run_dir).absolute())
    found = []
    for proc in psutil.process_iter():
        try:
            run = proc.environ().get(RUN_ENV, "")
            mine = run.startswith(marker + os.sep) if under else run == marker
            if mine and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def wait_no_stragglers(run_dir: Path, timeout: float = 15.0, *, under: bool = False) -> list[psutil.Process]:
    deadline = time.monotonic() + timeout
    while True:
        left = stragglers(run_dir, under=under)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def stop_and_reap(proc: subprocess.Popen, *run_dirs: Path) -> None:
    """A test's ``finally``: kill the command if it is still running, then anything of its runs."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for run_dir in run_dirs:
        reap_stragglers(run_dir)


def reap_stragglers(run_dir: Path, *, under: bool = False) -> None:
    """Never leave a test's processes behind, whatever the test found."""
    for proc in stragglers(run_dir, under=under):
        try:
            proc.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass


def run_together(commands: list[tuple[str, ...]], timeout: float) -> tuple[list[subprocess.Popen], list[tuple]]:
    """Start every ``takeover`` command at once (a cluster's beside a local one, shards side by side), wait
    for all of them, and kill any still running when that fails: the processes and their (stdout, stderr)."""
    procs = [start_takeover(*argv) for argv in commands]
    try:
        outs = [p.communicate(timeout=timeout) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return procs, outs
