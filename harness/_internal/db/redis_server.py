"""A private redis-server for one command or one run: in a temp folder, on a free loopback port, gone
afterwards, always.

Why private: a run must not depend on, or leave anything in, a server someone else runs, and the
faults (a crash, a freeze, a power loss) must reach this run's server alone. The server listens on
``127.0.0.1`` and a port the kernel just called free; Redis 7.0 cannot pick a port itself (``--port 0``
turns TCP off), so when another process took the port between the two, the start is tried again on
another (:data:`START_TRIES`).

Why the same cleanup as PostgreSQL's (takeover._internal.db.server): the watchdog (``takeover/db/watchdog.py``) is
started first, reads a pipe only takeover holds, and when the kernel closes it (any end of takeover,
SIGKILL included) kills the pid in ``FOLDER/redis.pid`` and removes the folder. The server also dies
with the thread that started it (``PR_SET_PDEATHSIG``) when that is takeover's main thread. Every
server's title names the takeover that started it (:data:`OWNER_MARK`), so a leftover is traced to its
command.

Persistence (``--redis-persistence``, :data:`PERSISTENCE`): ``always`` is an append-only file synced
before every reply (``appendfsync always``), ``everysec`` the same file synced once a second (a crash
of the machine loses up to a second of acknowledged writes), ``none`` no file at all (no AOF, no RDB
snapshot: a restart starts empty). :meth:`crash` and :meth:`restart` are the restart fault (SIGKILL,
then a start on the same folder, which replays the AOF); :meth:`pause` and :meth:`resume` the freeze.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType

from takeover._internal.db import redis as redis_db
from takeover._internal.db.kinds import DEFAULT_REDIS_PERSISTENCE, REDIS_PERSISTENCE
from takeover._internal.db.server import child_setup, release_watchdog, start_watchdog
from takeover._internal.db.watchdog import REDIS_PID_FILE, stop_redis
from takeover.errors import UsageError

ALWAYS, EVERYSEC, NONE = REDIS_PERSISTENCE
PERSISTENCE = REDIS_PERSISTENCE
DEFAULT_PERSISTENCE = DEFAULT_REDIS_PERSISTENCE
HOST = "127.0.0.1"
START_TIMEOUT = 60.0  # seconds a start may take to answer PING (a loaded machine is slow)
START_TRIES = 5  # ports tried before giving up (another process took the free port meanwhile)
OWNER_ENV = "TAKEOVER_REDIS_OWNER"
# redis-server writes its title over its arguments and environment (/proc/PID/environ no longer holds
# OWNER_ENV), so the owner is in the title too: ``redis-server 127.0.0.1:PORT takeover-owner=PID``.
OWNER_MARK = "takeover-owner="
BINARY_ENV = "TAKEOVER_REDIS_SERVER_BIN"  # another redis-server than the one on PATH
NETNS_PORT = 6379  # a server in a network namespace of the run's own: the port is free there
SOCKET = "redis.sock"  # its Unix socket in the folder: how takeover reaches a server in another namespace


def owner_of(cmdline: list[str]) -> int | None:
    """The pid of the takeover that started the redis-server with this command line (its title), if any."""
    for word in " ".join(cmdline).split():
        if word.startswith(OWNER_MARK) and word[len(OWNER_MARK):].isdigit():
            return int(word[len(OWNER_MARK):])
    return None


def find_binary() -> str:
    """The redis-server to start, or a one-line UsageError naming the package."""
    found = os.environ.get(BINARY_ENV) or shutil.which("redis-server")
    if not found:
        raise UsageError("--db redis needs redis-server and found none: install it (Debian: apt-get install "
                         "redis-server) or give --db a redis:// URL of your own server")
    return found


def persistence_args(persistence: str) -> list[str]:
    """redis-server's options for a ``--redis-persistence`` value."""
    if persistence == NONE:
        return ["--appendonly", "no", "--save", ""]
    return ["--appendonly", "yes", "--appendfsync", "always" if persistence == ALWAYS else "everysec", "--save", ""]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


class PrivateRedis:
    """``with PrivateRedis() as server:`` a running server at ``server.url`` (database 0); gone afterwards.

    ``data_dir``: where the server keeps its files (its AOF), when not in its own folder: a folder on the
    power-loss layer (takeover._internal.powerloss). ``netns`` and ``address``: the server runs inside that network
    namespace and listens on ``address`` too (the run's hosts, takeover._internal.net)."""

    def __init__(self, persistence: str = DEFAULT_PERSISTENCE, data_dir: Path | None = None, netns: str = "",
                 address: str = "", databases: int = redis_db.DATABASES) -> None:  # fmt: skip
        if persistence not in PERSISTENCE:
            raise UsageError(f"--redis-persistence must be one of {', '.join(PERSISTENCE)}, got {persistence!r}")
        self.persistence = persistence
        self.binary = find_binary()
        self.data_dir = data_dir
        self.netns = netns
        self.address = address
        self.databases = databases
        self.folder: Path | None = None
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.watchdog: subprocess.Popen[bytes] | None = None
        self.url = ""

    @property
    def data(self) -> Path:
        assert self.folder is not None
        return self.data_dir if self.data_dir is not None else self.folder / "data"

    @property
    def socket_path(self) -> str:
        """The server's Unix socket (every server has one; a server in a namespace is reached by it)."""
        assert self.folder is not None
        return str(self.folder / SOCKET)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    def __enter__(self) -> PrivateRedis:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="takeover-redis-"))
        self.watchdog = start_watchdog(self.folder)
        self.data.mkdir(parents=True, exist_ok=True)
        last = ""
        for _ in range(START_TRIES):
            self.port = NETNS_PORT if self.netns else _free_port()
            last = self._start_server()
            if not last:
                self.url = f"redis://{HOST}:{self.port}/0"
                return
            if "in use" not in last:
                break
        raise UsageError(f"--db redis: redis-server did not start: {last}")

    def _argv(self) -> list[str]:
        assert self.folder is not None
        bind = f"{HOST} {self.address}" if self.address else HOST
        return [self.binary, "--bind", bind, "--port", str(self.port), "--dir", str(self.data),
                *persistence_args(self.persistence), "--databases", str(self.databases), "--daemonize", "no",
                "--logfile", str(self.folder / "server.log"), "--protected-mode", "no" if self.address else "yes",
                "--enable-debug-command", "local", "--appendfilename", "appendonly.aof",
                "--proc-title-template", f"{{title}} {{listen-addr}} {OWNER_MARK}{os.getpid()}",
                "--unixsocket", str(self.folder / SOCKET), "--unixsocketperm", "700",
                # a client cut off by a partition is noticed within seconds, as PostgreSQL's keepalives do
                "--tcp-keepalive", "1"]  # fmt: skip

    def _start_server(self) -> str:
        """Start the server on ``self.port`` and wait until it answers; '' when it does, else why not."""
        assert self.folder is not None
        env = {**os.environ, OWNER_ENV: str(os.getpid())}
        # PR_SET_PDEATHSIG fires when the *thread* that started the child ends: only the main thread lives as
        # long as takeover (a restart runs in a thread of its own); the watchdog covers the rest.
        main = threading.current_thread() is threading.main_thread()
        self.proc = subprocess.Popen(self._argv(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, env=env, close_fds=True,
                                     preexec_fn=lambda: child_setup(None, self.netns, main))  # fmt: skip
        (self.folder / REDIS_PID_FILE).write_text(f"{self.proc.pid}\n")
        deadline = time.monotonic() + START_TIMEOUT
        client = redis_db.connect(f"unix://{self.folder / SOCKET}?db=0", socket_timeout=5)
        try:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    return self._log_tail() or f"exit {self.proc.returncode}"
                with contextlib.suppress(Exception):
                    if client.ping():
                        return ""
                time.sleep(0.005)
        finally:
            client.close()
        self._kill()
        return f"no answer within {START_TIMEOUT:g} s"

    def _log_tail(self) -> str:
        assert self.folder is not None
        try:
            lines = (self.folder / "server.log").read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " ".join(lines[-1].split()[-12:]) if lines else ""

    def _kill(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    # -- the faults ----------------------------------------------------------------------------------------------
    def crash(self) -> None:
        """SIGKILL: what the server had not written (or, with ``everysec``, not synced) is gone with it;
        no shutdown, no final AOF flush."""
        self._kill()

    def restart(self) -> None:
        """Start the server again on the same port and folder (it replays its AOF, when it has one)."""
        why = self._start_server()
        if why:
            raise UsageError(f"redis-server did not start again: {why}")

    def pause(self) -> None:
        """SIGSTOP: the server answers nobody until :meth:`resume`; its clients' calls wait (or time out)."""
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        """Kill the server (its data is thrown away), then the folder; the watchdog is released."""
        if self.proc is not None:
            self._kill()
            self.proc = None
        if self.folder is not None:
            stop_redis(self.folder)
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None
        release_watchdog(self.watchdog)
        self.watchdog = None
