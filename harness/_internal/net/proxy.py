"""``--net-delay``: a TCP proxy on the database's address that holds every byte back for a while, each way.

Why a proxy: this kernel has no netem, so latency cannot be a queueing discipline on the veth. The proxy
listens on the database's address in the run's namespace (port :data:`PORT`, the workers' URL names it)
and passes each connection to the server's Unix socket, every chunk delivered ``delay`` seconds after it
arrived, in order. It is a thread of the coordinator (asyncio: one loop for every connection), so it goes
when takeover goes.

What a real path does, it does too: a partition's firewall rules drop what reaches its address, as they do
the server's; a server that ends a session (a connection kill, a crash) closes the proxy's upstream, and
the proxy closes the worker's side; a worker cut off is noticed by the proxy's keepalives and TCP user
timeout (as the server notices it without a proxy), which close the upstream so the server ends the session.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading

from takeover._internal.net.namespaces import enter

PORT = 5433
READ = 65536


def _keepalive(sock: socket.socket) -> None:
    """As the server's settings for a direct connection (takeover._internal.net.hosts.SERVER_SETTINGS)."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for option, value in (("TCP_KEEPIDLE", 1), ("TCP_KEEPINTVL", 1), ("TCP_KEEPCNT", 2), ("TCP_USER_TIMEOUT", 2000),
                          ("TCP_NODELAY", 1)):  # fmt: skip
        if hasattr(socket, option):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, option), value)


class DelayProxy:
    """``with DelayProxy(netns, address, upstream, delay):`` listening on ``address:PORT`` in ``netns``."""

    def __init__(self, netns: str, address: str, upstream: str, delay: float) -> None:
        self.netns = netns
        self.address = address
        self.upstream = upstream  # the server's Unix socket file
        self.delay = delay
        self.loop: asyncio.AbstractEventLoop | None = None
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._main, name="takeover-delay-proxy", daemon=True)

    def __enter__(self) -> DelayProxy:
        self.thread.start()
        self.ready.wait(30)
        if self.error is not None:
            raise OSError(f"the delay proxy could not listen on {self.address}:{PORT}: {self.error}")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    def _main(self) -> None:
        try:
            enter(self.netns)  # this thread only: its listening socket is on the run's network
            self.loop = asyncio.new_event_loop()
            server = self.loop.run_until_complete(asyncio.start_server(self._serve, self.address, PORT))
        except BaseException as exc:  # noqa: BLE001 - handed to __enter__, which raises it as one line
            self.error = exc
            self.ready.set()
            return
        self.ready.set()
        try:
            self.loop.run_forever()
        finally:
            server.close()
            self.loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                _keepalive(sock)
        try:
            up_reader, up_writer = await asyncio.open_unix_connection(self.upstream)
        except OSError:
            writer.close()
            return
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer), return_exceptions=True)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Every chunk written ``delay`` after it was read, in order; the other side closed when this one ends."""
        loop = asyncio.get_running_loop()
        try:
            while True:
                data = await reader.read(READ)
                if not data:
                    break
                loop.call_later(self.delay, self._deliver, writer, data)
        except OSError:
            pass
        loop.call_later(self.delay, self._close, writer)

    @staticmethod
    def _deliver(writer: asyncio.StreamWriter, data: bytes) -> None:
        if not writer.is_closing():
            writer.write(data)

    @staticmethod
    def _close(writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception):
            writer.close()
