"""One run's Redis server (``--db redis``): started for the run with the run's persistence, crashed,
frozen and its clients' connections ended by the run's faults (takeover._internal.run.net_faults), gone with the run.

Why a server per run rather than a database of the command's server (takeover._internal.db.redis): the faults
act on a whole server (SIGKILL, SIGSTOP, a power loss of its disk), which must reach this run alone
(a sweep's runs go side by side), and ``--redis-persistence`` is the run's, written in its config.json.
Starting one costs 0.1-0.3 s on this machine, next to a run of seconds.

The workers run on this machine and reach the server over loopback TCP; a connection kill finds a
worker's connections by their local ports (the worker's process and its children, as an ``exec:``
queue's adapter is one: psutil) and ends them with ``CLIENT KILL ADDR``, as a proxy or a failover
ends them: the queue's client notices on its next call. The faults need no hosts, so a run on Redis
has them without root; the history records them as a run with hosts does.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

import psutil

from takeover._internal.config import RunConfig
from takeover._internal.db import redis as redis_db
from takeover._internal.db.redis_server import HOST, PrivateRedis
from takeover._internal.run.net_site import OnHosts
from takeover._internal.run.reply_dropper import ReplyDropper

KILL_TIMEOUT = 2.0  # seconds the CLIENT KILL may take (the server may be starting again)


def tcp_ports(pid: int, remote_port: int) -> list[int]:
    """The local ports of the TCP connections to ``remote_port`` that process ``pid`` and its children hold
    (an ``exec:`` queue's adapter is a child). Read from each process's own ``/proc/PID/net/tcp``, which is
    its network namespace's: a worker on a host of its own (``--hosts``) is seen there, not in ours."""
    try:
        proc = psutil.Process(pid)
        procs = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return []
    ports: set[int] = set()
    for p in procs:
        try:
            fds = os.listdir(f"/proc/{p.pid}/fd")
            inodes = set()
            for fd in fds:
                with contextlib.suppress(OSError):
                    link = os.readlink(f"/proc/{p.pid}/fd/{fd}")
                    if link.startswith("socket:["):
                        inodes.add(link[8:-1])
            lines = Path(f"/proc/{p.pid}/net/tcp").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[9] in inodes and int(fields[2].rpartition(":")[2], 16) == remote_port:
                ports.add(int(fields[1].rpartition(":")[2], 16))
    return sorted(ports)


class RedisSite:
    """``with RedisSite(cfg) as site:`` ``site.database`` is the run's database (``redis://127.0.0.1:PORT/0``).

    ``count`` is 0 (no hosts: the workers run here); ``pid_of(slot)`` is set by the coordinator and gives
    a live worker's pid, for :meth:`kill_connections`."""

    count = 0

    def __init__(self, cfg: RunConfig, data_dir: Path | None = None) -> None:
        self.server = PrivateRedis(cfg.redis_persistence, data_dir=data_dir)
        self.database = ""
        self.pid_of: Callable[[int], int | None] = lambda slot: None
        self.lost_replies = cfg.db_lost_reply_rate > 0
        self.dropper: ReplyDropper | None = None

    def __enter__(self) -> RedisSite:
        self.server.__enter__()
        self.database = self.server.url
        if self.lost_replies:  # everybody reaches the server through the relay (only workers' answers are lost)
            try:
                self.dropper = ReplyDropper(self.server.port).__enter__()
            except BaseException:
                self.server.__exit__(None, None, None)
                raise
            self.database = f"redis://{HOST}:{self.dropper.port}/0"
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self.dropper is not None:
            self.dropper.stop()
        self.server.__exit__(kind, exc, tb)

    @property
    def client_port(self) -> int:
        """The port the workers connect to: the relay's when there is one, else the server's."""
        return self.dropper.port if self.dropper is not None else self.server.port

    def host_name(self, slot: int) -> str:
        return ""

    def worker_ports(self, pid: int) -> list[int]:
        """The local ports of the connections process ``pid`` (and its children) holds to the server."""
        return tcp_ports(pid, self.client_port)

    def kill_connections(self, slot: int, process: int) -> int:
        """End every connection of the worker in ``slot`` to the server (``CLIENT KILL ADDR``); how many ended."""
        pid = self.pid_of(slot)
        ports = self.worker_ports(pid) if pid else []
        if self.dropper is not None:  # the server knows them by the relay's ports
            ports = self.dropper.upstream_ports(ports)
        if not ports:
            return 0
        client = redis_db.connect(self.server.url, socket_timeout=KILL_TIMEOUT)
        try:
            return sum(int(client.client_kill_filter(_id=None, addr=f"{HOST}:{port}")) for port in ports)
        finally:
            client.close()

    def arm_lost_reply(self, slot: int, lost: Callable[[int], None]) -> bool:
        """The next answer on the worker's connections is lost (takeover._internal.run.reply_dropper); False when it has
        none open."""
        pid = self.pid_of(slot)
        if self.dropper is None or not pid:
            return False
        return self.dropper.arm(self.worker_ports(pid), lost)


class RedisHostsSite(OnHosts):
    """``--db redis --hosts N``: the run's own redis-server on the hosts' network (takeover._internal.net.hosts), as
    takeover._internal.run.net_site puts PostgreSQL's: inside the database's namespace, listening on ``10.200.0.1`` for
    the workers on their hosts, and on a Unix socket in its folder, which the coordinator reaches through a relay
    on this machine's loopback (``site.database``; no network fault reaches it). Partitions, one-way cuts,
    the delay proxy and packet loss are the hosts' own; a connection kill ends the worker's connections by
    its host's address and its ports there (``CLIENT KILL ADDR``).

    The workers' URL asks redis-py for a 5 s socket timeout (``socket_timeout``, ``socket_connect_timeout``):
    a call cut off by a partition fails within seconds, as PostgreSQL's workers' URLs ask of libpq."""

    def __init__(self, cfg: RunConfig) -> None:
        from takeover._internal.net.hosts import Network

        self.count = cfg.hosts
        self.delay = cfg.net_delay
        self.loss = cfg.net_loss
        self.persistence = cfg.redis_persistence
        self.network = Network(cfg.hosts)
        self.server: PrivateRedis | None = None
        self.relay: ReplyDropper | None = None
        self.port = 0
        self.database = ""
        self.pid_of: Callable[[int], int | None] = lambda slot: None
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> RedisHostsSite:
        from takeover._internal.net.hosts import DB_ADDRESS

        try:
            self._stack.enter_context(self.network)
            self.server = self._stack.enter_context(
                PrivateRedis(self.persistence, netns=self.network.db_path, address=DB_ADDRESS))
            self.port = self.server.port
            self.relay = self._stack.enter_context(ReplyDropper(self.server.socket_path))
            self.database = f"redis://{HOST}:{self.relay.port}/0"
            self._degrade(self.server.socket_path)
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stack.close()  # the relay, the server, then the network

    def worker_url(self, slot: int, process: int) -> str:
        from takeover._internal.net.hosts import DB_ADDRESS

        return f"redis://{DB_ADDRESS}:{self.port}/0?socket_timeout=5&socket_connect_timeout=2"

    @property
    def service_socket(self) -> str:
        from takeover._internal.net.hosts import service_socket

        assert self.server is not None and self.server.folder is not None
        return service_socket(self.server.folder)

    def kill_connections(self, slot: int, process: int) -> int:
        """End the worker's connections to the server (``CLIENT KILL ADDR`` of its host's address and its
        ports); none through the delay proxy, whose connections the server knows by the proxy's socket."""
        from takeover._internal.net.hosts import host_address

        pid = self.pid_of(slot)
        if not pid or self.delay > 0 or self.server is None:
            return 0
        ports = tcp_ports(pid, self.server.port)
        if not ports:
            return 0
        client = redis_db.connect(self.database, socket_timeout=KILL_TIMEOUT)
        try:
            address = host_address(self.host_of(slot))
            return sum(int(client.client_kill_filter(_id=None, addr=f"{address}:{port}")) for port in ports)
        finally:
            client.close()
