"""One run's Redis server (``--db redis``): started for the run with the run's persistence, crashed,
frozen and its clients' connections ended by the run's faults (takeover.net.faults), gone with the run.

Why a server per run rather than a database of the command's server (takeover.db.redis): the faults
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

from collections.abc import Callable
from pathlib import Path
from types import TracebackType

import psutil

from takeover.config import RunConfig
from takeover.db import redis as redis_db
from takeover.db.redis_server import HOST, PrivateRedis
from takeover.run.reply_dropper import ReplyDropper

KILL_TIMEOUT = 2.0  # seconds the CLIENT KILL may take (the server may be starting again)


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
        ports: list[int] = []
        try:
            proc = psutil.Process(pid)
            procs = [proc, *proc.children(recursive=True)]
        except psutil.Error:
            return ports
        for p in procs:
            try:
                conns = p.net_connections(kind="tcp4")
            except psutil.Error:
                continue
            ports += [c.laddr.port for c in conns if c.raddr and c.raddr.port == self.client_port
                      and c.raddr.ip == HOST]  # fmt: skip
        return sorted(set(ports))

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
        """The next answer on the worker's connections is lost (takeover.run.reply_dropper); False when it has
        none open."""
        pid = self.pid_of(slot)
        if self.dropper is None or not pid:
            return False
        return self.dropper.arm(self.worker_ports(pid), lost)
