"""A private PostgreSQL server for one command: started in a temp folder, removed afterwards, always.

Why private: a run must not depend on, or leave anything in, a server someone else runs, and a fresh
machine has none running. ``initdb`` makes a cluster in a temp folder and ``pg_ctl`` starts it there,
listening only on a Unix socket in that folder (no TCP port at all, so nothing outside this machine can
reach it and two commands can never collide on a port). ``initdb`` refuses to run as root, so as root
both run as the ``postgres`` user that Debian's package creates; otherwise as the current user.

Why a watchdog: ``pg_ctl`` detaches the server into a session of its own, so it outlives takeover when
takeover is SIGKILLed (no ``finally`` runs then). A small process (``takeover/db/watchdog.py``, standard
library only) is started first, in a session of its own so that Ctrl-C does not reach it, and reads a
pipe that only takeover holds. When that pipe closes, which the kernel does however takeover ends, it
shuts the server down (immediate mode) and removes the folder. On a normal end takeover does both
itself first; the watchdog then finds nothing to do.

The settings that clean up after a killed or frozen client (:data:`SETTINGS`): a killed worker's Unix
socket is closed by the kernel, so its backend ends at once and its row locks go with it; a frozen
worker's socket stays open, so a transaction it left open is ended by
``idle_in_transaction_session_timeout``, and a statement whose client went away meanwhile by
``client_connection_check_interval``.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from types import TracebackType

from takeover._internal.db import postgres
from takeover._internal.db.watchdog import stop_server
from takeover.errors import UsageError

PORT = 5432  # only names the socket file (.s.PGSQL.5432) inside the private folder: no TCP port is opened
RUN_AS = "postgres"  # the user initdb and the server run as when takeover runs as root
START_TIMEOUT = 60  # seconds pg_ctl waits for the server to accept connections (a loaded machine is slow)

# How long a frozen holder's open transaction may block the others (its row locks) before the server ends
# its session: the lease of a stress run is about a second, so a takeover waits at most this much more.
IDLE_IN_TRANSACTION_TIMEOUT = "2s"
SETTINGS: dict[str, str] = {
    "listen_addresses": "''",  # the Unix socket only
    "idle_in_transaction_session_timeout": IDLE_IN_TRANSACTION_TIMEOUT,
    "client_connection_check_interval": "1s",
    "max_connections": "200",  # a sweep's runs, a pooled adapter's connections, the coordinator and scenarios
    "fsync": "on",  # a queue's commit is tested as users run it: durable
    "log_min_messages": "warning",
}

_PR_SET_PDEATHSIG = 1
# Every process of a private server carries the pid of the takeover that started it, as a run's processes
# carry TAKEOVER_RUN_DIR: a leftover server can be traced to its command (and tests look for stragglers so).
OWNER_ENV = "TAKEOVER_PG_OWNER"


def find_binaries() -> Path:
    """The folder with ``initdb`` and ``pg_ctl``: on PATH, else Debian's /usr/lib/postgresql/N/bin (newest)."""
    env = os.environ.get("TAKEOVER_PG_BIN")
    candidates = [Path(env)] if env else []
    found = shutil.which("initdb")
    if found:
        candidates.append(Path(found).resolve().parent)
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2])
                      if p.split("/")[-2].isdigit() else 0, reverse=True)  # fmt: skip
    candidates += [Path(p) for p in versions] + [Path("/usr/local/pgsql/bin")]
    for folder in candidates:
        if (folder / "initdb").is_file() and (folder / "pg_ctl").is_file():
            return folder
    raise UsageError("--db postgres needs PostgreSQL's server programs (initdb, pg_ctl) and found none: install "
                     "them (Debian: apt-get install postgresql) or give --db a postgresql:// URL of your own server")


def _socket_parent() -> str | None:
    """Where the server's folder goes: the temp folder, unless its path is too long for the Unix socket
    inside it (107 bytes on Linux, with ``takeover-pg-XXXXXXXX/.s.PGSQL.5432``): then /tmp."""
    base = tempfile.gettempdir()
    return "/tmp" if len(base) > 64 and os.path.isdir("/tmp") else None


def _server_user() -> tuple[int, int] | None:
    """(uid, gid) to run the server as when we are root; None to run it as ourselves."""
    if os.geteuid() != 0:
        return None
    import pwd

    try:
        entry = pwd.getpwnam(RUN_AS)
    except KeyError:
        raise UsageError(f"--db postgres as root runs the server as the user {RUN_AS!r} (initdb refuses root), and "
                         f"there is none: install Debian's postgresql package, or run takeover as another user"
                         ) from None
    return entry.pw_uid, entry.pw_gid


def child_setup(user: tuple[int, int] | None, netns: str = "", deathsig: bool = True) -> None:
    """In the child, before exec: enter the run's network namespace (a server on the run's own network,
    takeover._internal.net), become the server's user, then die with takeover (initdb, pg_ctl; ``deathsig``: with
    the thread that started it, which must then be one that lives as long as takeover)."""
    if netns:  # before setuid, which would drop the right to enter it
        from takeover._internal.net.namespaces import enter

        enter(netns)
    if user is not None:
        os.setgroups([])
        os.setgid(user[1])
        os.setuid(user[0])
    if deathsig and sys.platform.startswith("linux"):  # after setuid, which would clear it
        with contextlib.suppress(OSError):
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def start_watchdog(folder: Path) -> subprocess.Popen[bytes]:
    """The watchdog of a private server's ``folder`` (takeover/db/watchdog.py), started before the server:
    from here on, however takeover ends, the folder and the server go."""
    return subprocess.Popen(
        [sys.executable, "-I", str(Path(__file__).with_name("watchdog.py")), str(folder)],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True, close_fds=True)  # fmt: skip


def release_watchdog(watchdog: subprocess.Popen[bytes] | None) -> None:
    """Close the watchdog's pipe (the server and its folder are gone already: it finds nothing to do)."""
    if watchdog is None:
        return
    with contextlib.suppress(OSError):
        assert watchdog.stdin is not None
        watchdog.stdin.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        watchdog.wait(timeout=10)


class PrivateServer:
    """``with PrivateServer() as server:`` a running server at ``server.admin_url``; gone afterwards.

    ``netns`` and ``address``: the server runs inside that network namespace (``/proc/PID/ns/net``) and
    listens on ``address`` there too, besides its socket, for workers on the run's hosts (takeover._internal.net);
    ``settings`` are added to :data:`SETTINGS` (the hosts' keepalives). :meth:`crash` and :meth:`restart`
    are the database restart fault."""

    def __init__(self, netns: str = "", address: str = "", settings: dict[str, str] | None = None) -> None:
        self.netns = netns
        self.address = address
        self.settings = {**SETTINGS, **(settings or {})}
        if address:
            self.settings["listen_addresses"] = f"'{address}'"
        self.bin = find_binaries()
        self.user = _server_user()
        self.folder: Path | None = None
        self.watchdog: subprocess.Popen[bytes] | None = None
        self.admin_url = ""

    @property
    def data(self) -> Path:
        assert self.folder is not None
        return self.folder / "data"

    def __enter__(self) -> PrivateServer:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def _run(self, argv: list[str], what: str) -> None:
        env = {**os.environ, OWNER_ENV: str(os.getpid())}
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              preexec_fn=lambda: child_setup(self.user, self.netns), cwd=self.folder, env=env,
                              check=False)  # fmt: skip
        if proc.returncode != 0:
            tail = " ".join(proc.stdout.decode(errors="replace").split())[-300:]
            raise UsageError(f"--db postgres: {what} failed (exit {proc.returncode}): {tail}")

    def start(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="takeover-pg-", dir=_socket_parent()))
        self.watchdog = start_watchdog(self.folder)
        if self.user is not None:
            os.chown(self.folder, *self.user)
        self._run([str(self.bin / "initdb"), "-D", str(self.data), "-U", RUN_AS, "--auth=trust", "-E", "UTF8",
                   "--no-sync", "--no-instructions"], "initdb")  # fmt: skip
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write("\n# takeover's private server (takeover._internal.db.server)\n")
            conf.write(f"unix_socket_directories = '{self.folder}'\nport = {PORT}\n")
            for name, value in self.settings.items():
                conf.write(f"{name} = {value}\n")
        if self.address:  # the run's hosts reach it over TCP, from their own addresses only (takeover._internal.net)
            with open(self.data / "pg_hba.conf", "a") as hba:
                hba.write(f"host all all {self.address.rsplit('.', 2)[0]}.0.0/16 trust\n")
        self._start_server()
        self.admin_url = postgres.socket_url(str(self.folder), PORT, RUN_AS)

    def _start_server(self) -> None:
        assert self.folder is not None
        self._run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.folder / "server.log"),
                   "-w", "-t", str(START_TIMEOUT), "start"], "starting the server")  # fmt: skip

    def crash(self) -> None:
        """An immediate stop (SIGQUIT to the postmaster: every backend ends at once, no checkpoint), as a
        crash: what was committed must come back from the WAL at :meth:`restart`."""
        stop_server(self.data)

    def restart(self) -> None:
        """Start the server again on the same data after :meth:`crash` (it recovers from its WAL)."""
        self._start_server()

    def _postmaster(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None

    def pause(self) -> None:
        """SIGSTOP to the postmaster's process group (pg_ctl makes it a session leader, its backends in its
        group): every session stalls at once until :meth:`resume`."""
        pid = self._postmaster()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGSTOP)

    def resume(self) -> None:
        pid = self._postmaster()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGCONT)

    def stop(self) -> None:
        """Immediate shutdown (the data is thrown away), then the folder; the watchdog is released."""
        if self.folder is not None:
            stop_server(self.data)
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None
        release_watchdog(self.watchdog)
        self.watchdog = None
