"""One run's site: its network of hosts (takeover._internal.net.hosts), its database server on that network, and
the run's database there, made together and gone together.

Why the run makes a server of its own rather than use the command's: the server must live inside the
run's network namespace to listen on its address there, and the database restart fault needs to stop
and start it; a ``--db postgres`` command's server listens on a Unix socket only. The command's server
still serves everything else (the queue's contract check, the diagnosis' confirmations).
"""

from __future__ import annotations

import contextlib
import re
import uuid
from types import TracebackType

from takeover._internal.db import postgres
from takeover._internal.db.server import PORT as SERVER_PORT
from takeover._internal.db.server import PrivateServer
from takeover._internal.net.hosts import (
    DB_ADDRESS,
    PORT,
    SERVER_SETTINGS,
    Network,
    host_name,
    host_of,
    service_socket,
    worker_url,
)
from takeover._internal.net.proxy import PORT as PROXY_PORT
from takeover._internal.net.proxy import DelayProxy


class OnHosts:
    """Where each worker of a run with hosts runs (slot ``s`` on host ``s % N + 1``), for any database's site."""

    count: int
    network: Network
    loss: float
    delay: float
    port: int
    _stack: contextlib.ExitStack

    def _degrade(self, upstream: str) -> None:
        """The run's loss on every host's path, and its delay by the proxy in front of ``upstream`` (the
        server's Unix socket), which the workers then reach instead (on the proxy's port)."""
        if self.loss > 0:
            self.network.lose(self.loss)
        if self.delay > 0:
            self._stack.enter_context(DelayProxy(self.network.db_path, DB_ADDRESS, upstream, self.delay))
            self.port = PROXY_PORT

    def host_of(self, slot: int) -> int:
        return host_of(slot, self.count)

    def host_name(self, slot: int) -> str:
        return host_name(self.host_of(slot))

    def netns_of(self, slot: int) -> str:
        return self.network.host_path(self.host_of(slot))


class Site(OnHosts):
    """``with Site(hosts) as site:`` ``site.database`` (the coordinator's URL, over the Unix socket) and
    ``site.worker_url(slot, process)`` (a worker's, over its host's network)."""

    def __init__(self, hosts: int, label: str = "run", delay: float = 0.0, loss: float = 0.0) -> None:
        self.count = hosts
        self.delay = delay
        self.loss = loss
        self.port = PORT
        self.name = f"takeover_{re.sub(r'[^a-z0-9_]', '_', label.lower())[:32]}_{uuid.uuid4().hex[:12]}"
        self.network = Network(hosts)
        self.server: PrivateServer | None = None
        self.database = ""
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> Site:
        try:
            self._stack.enter_context(self.network)
            self.server = self._stack.enter_context(
                PrivateServer(netns=self.network.db_path, address=DB_ADDRESS, settings=SERVER_SETTINGS))
            self.database = postgres.create_database(self.server.admin_url, self.name)
            assert self.server.folder is not None
            self._degrade(str(self.server.folder / f".s.PGSQL.{SERVER_PORT}"))
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stack.close()  # the server (and the database with it), then the network

    def worker_url(self, slot: int, process: int) -> str:
        return worker_url(self.name, slot, process, self.port)

    @property
    def service_socket(self) -> str:
        assert self.server is not None and self.server.folder is not None
        return service_socket(self.server.folder)
