"""A relay between a run's workers and its Redis server that can lose one reply (``--db-lost-reply-rate``).

Why a relay: a reply lost *from* the server is not a reply the worker drops (the ``lose_reply`` fault): the
server ran the command, and the worker's client library sees its connection die before the answer came.
redis-py (as ioredis and most clients) then sends the command again on a new connection, so the command
runs twice unless it is safe to run twice. Only something between the two ends can show that, and only
on the wire: the relay forwards every byte both ways, and when a worker's connection is armed it
swallows the next answer from the server on it and closes both sides, as a failover or a proxy that
dies mid-reply does.

One thread, one ``selectors`` loop; the workers connect to :attr:`port` (their run's URL names it), each
connection gets one of its own to the server. A connection the server ends (a restart, ``CLIENT KILL``)
is ended on the worker's side too. Only a run with ``--db-lost-reply-rate`` has a relay; every other
run's workers reach the server directly.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
from collections.abc import Callable

HOST = "127.0.0.1"
CHUNK = 65536


class ReplyDropper:
    """``with ReplyDropper(server_port) as relay:`` workers connect to ``relay.port``."""

    def __init__(self, upstream: int | str) -> None:
        self.upstream = upstream  # the server's port on 127.0.0.1, or its Unix socket's path
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind((HOST, 0))
        self.listener.listen(128)
        self.port = int(self.listener.getsockname()[1])
        self.sel = selectors.DefaultSelector()
        self.peer: dict[socket.socket, socket.socket] = {}  # each end -> the other
        self.client_port: dict[socket.socket, int] = {}  # the worker's end -> its port (the worker's local port)
        self.armed: dict[int, Callable[[int], None]] = {}  # worker's local port -> told how many bytes were lost
        self.lock = threading.Lock()
        self._wake_r, self._wake_w = socket.socketpair()
        self._stop = False
        self.thread = threading.Thread(target=self._loop, name="takeover-reply-dropper", daemon=True)

    def __enter__(self) -> ReplyDropper:
        self.sel.register(self.listener, selectors.EVENT_READ, "accept")
        self.sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what the faults ask ------------------------------------------------------------------------------------
    def arm(self, ports: list[int], lost: Callable[[int], None]) -> bool:
        """Lose the next answer the server sends on the worker connection from any of ``ports`` (its local
        ports); ``lost(bytes)`` is called (from the relay's thread) when it was. False: no such connection."""
        with self.lock:
            mine = [p for p in ports if p in self.client_port.values()]
            if not mine:
                return False
            for port in mine:
                self.armed[port] = lost
        return True

    def disarm(self) -> list[Callable[[int], None]]:
        """Lose nothing more; the callbacks of the arms that never met an answer."""
        with self.lock:
            left = list({id(cb): cb for cb in self.armed.values()}.values())
            self.armed.clear()
        return left

    def upstream_ports(self, ports: list[int]) -> list[int]:
        """The relay's own local ports of its connections to the server for these worker ports: the
        addresses the server knows those workers by (``CLIENT KILL ADDR``)."""
        with self.lock:
            return [int(up.getsockname()[1]) for c, up in self.peer.items()
                    if self.client_port.get(c) in ports and up.family == socket.AF_INET]  # fmt: skip

    def stop(self) -> None:
        self._stop = True
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        if self.thread.is_alive():
            self.thread.join(5)
        for s in [*self.peer, self.listener, self._wake_r, self._wake_w]:
            with contextlib.suppress(OSError):
                s.close()
        self.peer.clear()

    # -- the loop -----------------------------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop:
            for key, _ in self.sel.select(0.5):
                if key.data == "accept":
                    self._accept()
                elif key.data == "wake":
                    with contextlib.suppress(OSError):
                        self._wake_r.recv(64)
                else:
                    self._relay(key.fileobj)  # type: ignore[arg-type]

    def _accept(self) -> None:
        try:
            client, (_, port) = self.listener.accept()
        except OSError:
            return
        try:
            if isinstance(self.upstream, str):
                upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                upstream.settimeout(2)
                upstream.connect(self.upstream)
            else:
                upstream = socket.create_connection((HOST, self.upstream), timeout=2)
            upstream.settimeout(None)
        except OSError:  # the server is down (a restart): the worker sees its connection refused, as it would
            client.close()
            return
        with self.lock:
            self.peer[client], self.peer[upstream] = upstream, client
            self.client_port[client] = int(port)
        self.sel.register(client, selectors.EVENT_READ, "client")
        self.sel.register(upstream, selectors.EVENT_READ, "upstream")

    def _relay(self, sock: socket.socket) -> None:
        other = self.peer.get(sock)
        if other is None:
            return
        try:
            data = sock.recv(CHUNK)
        except OSError:
            data = b""
        if not data:
            self._close(sock, other)
            return
        client = other if sock not in self.client_port else sock
        if sock is not client:  # an answer from the server
            with self.lock:
                lost = self.armed.pop(self.client_port.get(client, -1), None)
                if lost is not None:  # one arm per fault: its other connections are not hit again
                    for port, cb in list(self.armed.items()):
                        if cb is lost:
                            del self.armed[port]
            if lost is not None:
                self._close(sock, other)
                lost(len(data))
                return
        try:
            other.sendall(data)
        except OSError:
            self._close(sock, other)

    def _close(self, a: socket.socket, b: socket.socket) -> None:
        with self.lock:
            for s in (a, b):
                self.peer.pop(s, None)
                self.client_port.pop(s, None)
        for s in (a, b):
            with contextlib.suppress(KeyError, ValueError):
                self.sel.unregister(s)
            with contextlib.suppress(OSError):
                s.close()
