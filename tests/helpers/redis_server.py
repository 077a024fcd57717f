"""A redis-server of the test's own, for the tests of the Redis queues: a temp folder, a free loopback port,
no persistence, and gone when the test is (its ``finally``; the kernel's parent-death signal when pytest
itself is killed, so no server outlives the suite).

Why not ``--db redis``'s server (takeover.db): these tests call the queue's methods directly, with
explicit clocks, and need nothing of a command; a bare server is the fewest moving parts.
"""

from __future__ import annotations

import contextlib
import ctypes
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

_PR_SET_PDEATHSIG = 1
START_TIMEOUT = 20.0


def _die_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@contextlib.contextmanager
def redis_server(databases: int = 16) -> Iterator[str]:
    """``redis://127.0.0.1:PORT``: a private server (append ``/N`` for logical database N)."""
    with tempfile.TemporaryDirectory(prefix="takeover-test-redis-") as folder:
        for _ in range(5):  # another process may take the free port between the look and the bind
            port = _free_port()
            proc = subprocess.Popen(
                ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--dir", folder, "--save", "",
                 "--appendonly", "no", "--databases", str(databases), "--daemonize", "no"],
                stdout=(Path(folder) / "server.log").open("w"), stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent)  # fmt: skip
            deadline = time.monotonic() + START_TIMEOUT
            while proc.poll() is None and not _ping(port) and time.monotonic() < deadline:
                time.sleep(0.02)
            if proc.poll() is None and _ping(port):
                break
            proc.kill()
            proc.wait()
        else:
            raise RuntimeError(f"redis-server did not start: {(Path(folder) / 'server.log').read_text()[-500:]}")
        try:
            yield f"redis://127.0.0.1:{port}"
        finally:
            proc.kill()
            proc.wait()
