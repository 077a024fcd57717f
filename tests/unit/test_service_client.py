"""ServiceClient against real sockets: the timeout and reply-matching semantics workers rely on.

The peer is a small scripted server, on 127.0.0.1 and on a Unix domain socket (a run's service
listens on the latter on Linux: every test runs on both), so the client is the thing under test and
the server may misbehave on purpose: answer late, split a reply, trickle it, hang up. One test also
drives the real service process, with a worker-like child frozen by SIGSTOP in the middle of its
wait. Assertions are on what came back (which reply, which exception), never on elapsed time,
except that a wait bounded by one timeout must end long before an unbounded one would.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from collections.abc import Callable

import pytest

from takeover._internal.run.service import ServiceClient, address_of, listen_local

FAMILIES = ["tcp", "unix"]


class ScriptedServer:
    """Accepts connections; each is handled by ``script(conn, request_line)`` per request line."""

    def __init__(self, script: Callable[[socket.socket, bytes, int], None], family: str) -> None:
        self.script = script
        if family == "tcp":
            self.sock = socket.create_server(("127.0.0.1", 0))
        else:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.bind("")  # an abstract name the kernel picks, as the run's service does
            self.sock.listen()
        self.address = address_of(self.sock)
        self.requests: list[bytes] = []
        self.connections = 0
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._accept_thread = threading.Thread(target=self._accept, daemon=True)
        self._accept_thread.start()

    def _accept(self) -> None:
        self.sock.settimeout(0.1)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            t.start()
            self._threads.append(t)

    def _serve(self, conn: socket.socket) -> None:
        buf = b""
        conn.settimeout(0.1)
        with conn:
            while not self._stop.is_set():
                try:
                    data = conn.recv(65536)
                except TimeoutError:
                    continue
                except OSError:
                    return
                if not data:
                    return
                buf += data
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    index = len(self.requests)
                    self.requests.append(line)
                    try:
                        self.script(conn, line, index)
                    except OSError:
                        return

    def close(self) -> None:
        self._stop.set()
        self.sock.close()
        self._accept_thread.join(5)
        for t in self._threads:
            t.join(5)


@pytest.fixture(params=FAMILIES)
def serve(request):
    servers: list[ScriptedServer] = []

    def start(script):
        server = ScriptedServer(script, request.param)
        servers.append(server)
        return server

    yield start
    for s in servers:
        s.close()


def _answer(conn: socket.socket, line: bytes) -> None:
    req = json.loads(line)
    conn.sendall(json.dumps({"reply": "ok", "result": "performed", "count": req["gen"]}).encode() + b"\n")


def test_a_late_reply_to_a_timed_out_request_is_never_read_as_the_next_answer(serve) -> None:
    release = threading.Event()

    def script(conn, line, index):
        if index == 0:  # the first request's reply comes only after the client gave up
            release.wait(30)
            time.sleep(0.2)
        _answer(conn, line)

    server = serve(script)
    client = ServiceClient(server.address, timeout=0.5)
    try:
        with pytest.raises(TimeoutError):
            client.call({"task": "a", "gen": 1})
        release.set()
        time.sleep(0.5)  # the late reply to gen 1 is sent (onto the connection the client dropped)
        for gen in (2, 3, 4):
            assert client.call({"task": "b", "gen": gen})["count"] == gen
    finally:
        client.close()
    assert server.connections == 2  # the timed-out connection was dropped, one new one served the rest


def test_a_reply_split_over_segments_is_reassembled(serve) -> None:
    def script(conn, line, index):
        body = json.dumps({"reply": "ok", "result": "performed", "count": 7}).encode() + b"\n"
        for i in range(0, len(body), 5):
            conn.sendall(body[i : i + 5])
            time.sleep(0.02)

    server = serve(script)
    client = ServiceClient(server.address, timeout=10.0)
    try:
        assert client.call({"task": "a", "gen": 1}) == {"reply": "ok", "result": "performed", "count": 7}
        assert client.call({"task": "a", "gen": 2})["count"] == 7  # and the stream stays in step
    finally:
        client.close()


def test_one_timeout_bounds_a_reply_that_trickles_forever(serve) -> None:
    """Each byte comes well within the timeout, but the reply never completes: TimeoutError anyway."""
    stop = threading.Event()

    def script(conn, line, index):
        while not stop.is_set():
            conn.sendall(b" ")
            time.sleep(0.05)

    server = serve(script)
    client = ServiceClient(server.address, timeout=0.5)
    started = time.monotonic()
    try:
        with pytest.raises(TimeoutError):
            client.call({"task": "a", "gen": 1})
    finally:
        stop.set()
        client.close()
    assert time.monotonic() - started < 20  # a per-recv timeout would never fire at all


@pytest.mark.parametrize(
    "sent_first", [b"", b'{"reply":"ok","res'], ids=["nothing", "half_a_line"]
)
def test_a_hang_up_is_a_connection_error_and_the_next_call_reconnects_clean(serve, sent_first) -> None:
    """Hung up before the reply, or after half of it: never a half line, and no leftover next time."""

    def script(conn, line, index):
        if index == 0:
            conn.sendall(sent_first)
            conn.shutdown(socket.SHUT_RDWR)
            raise OSError("hung up")
        _answer(conn, line)

    server = serve(script)
    client = ServiceClient(server.address, timeout=10.0)
    try:
        with pytest.raises(ConnectionError):
            client.call({"task": "a", "gen": 1})
        assert client.call({"task": "a", "gen": 6})["count"] == 6
    finally:
        client.close()
    assert server.connections == 2


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="abstract Unix socket names are Linux's")
def test_a_runs_service_listens_on_an_abstract_unix_socket_that_a_client_reaches() -> None:
    """No TCP/IP stack per round trip, and no socket file anywhere (so no path length limit)."""
    sock = listen_local()
    try:
        address = address_of(sock)
        assert sock.family == socket.AF_UNIX and isinstance(address, bytes) and address.startswith(b"\0")
        client = ServiceClient(address, timeout=10.0)
        try:
            threading.Thread(target=lambda: _echo_one(sock), daemon=True).start()
            assert client.call({"task": "a", "gen": 3})["count"] == 3
        finally:
            client.close()
    finally:
        sock.close()


def _echo_one(listener: socket.socket) -> None:
    conn, _ = listener.accept()
    with conn:
        _answer(conn, conn.recv(65536).split(b"\n")[0])
