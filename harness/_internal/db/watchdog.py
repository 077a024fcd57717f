"""The private server's watchdog: when takeover goes, however it goes, the server and its folder go too.

Run as ``python -I watchdog.py FOLDER`` in a session of its own (takeover._internal.db.server,
takeover._internal.db.redis_server), with a pipe from takeover as its standard input. It reads until the pipe
closes, which the kernel does when takeover ends for any reason, SIGKILL included; then it shuts down
the PostgreSQL server whose data is in ``FOLDER/data``, kills the redis-server named in
``FOLDER/redis.pid`` (a stopped one too: SIGKILL ends it), and removes ``FOLDER``. Standard library
only, and nothing of takeover: it must start in milliseconds and must not depend on the package that
may be half gone (an uninstall, an edited checkout).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import time
from pathlib import Path


def stop_server(data: Path, timeout: float = 10.0) -> None:
    """SIGQUIT the postmaster of ``data`` (immediate shutdown: it ends every backend before it exits) and
    wait until it is gone; SIGKILL it after ``timeout``. It is the one named in ``data/postmaster.pid``, or,
    when takeover died while the server was starting (no pid file yet), the ``postgres -D data`` found
    among the running processes."""
    for pid in _postmasters(data):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGCONT)  # a server frozen by --db-pause-rate must run to end its backends
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGQUIT)
        deadline = time.monotonic() + timeout
        while _alive(pid):
            if time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                deadline = float("inf")
            time.sleep(0.01)


def _postmasters(data: Path) -> list[int]:
    try:
        pid = int((data / "postmaster.pid").read_text().split("\n", 1)[0])
        return [pid] if _is_postmaster(pid) else []
    except (OSError, ValueError):
        pass
    wanted = str(data).encode()
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"-D" in args and wanted in args and any(a.endswith(b"postgres") for a in args[:1]):
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    """Running, and not a zombie: the server's parent is init, which may reap it a second or more later."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel (a zombie then counts as alive until it is reaped)
        try:
            os.kill(pid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True


def _is_postmaster(pid: int) -> bool:
    """A pid file outlives its server: never signal a process that took the pid over since."""
    try:
        return b"postgres" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return False
    except OSError:
        return True  # no /proc here: trust the pid file


def stop_redis(folder: Path, timeout: float = 10.0) -> None:
    """SIGKILL the redis-server whose pid is in ``folder/redis.pid`` (when that pid is still a redis-server)
    and wait until it is gone. No shutdown is asked of it: its data is thrown away with the folder."""
    try:
        pid = int((folder / REDIS_PID_FILE).read_text().strip())
    except (OSError, ValueError):
        return
    try:
        if b"redis-server" not in Path(f"/proc/{pid}/cmdline").read_bytes():
            return
    except FileNotFoundError:
        return
    except OSError:
        pass  # no /proc here: trust the pid file
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.01)


REDIS_PID_FILE = "redis.pid"


def main(folder: str) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # only the pipe's end ends us
    while sys.stdin.buffer.read(4096):
        pass
    stop_server(Path(folder) / "data")
    stop_redis(Path(folder))
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1])
