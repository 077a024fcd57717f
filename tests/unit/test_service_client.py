"""ServiceClient against real TCP sockets: the timeout and reply-matching semantics workers rely on.

The peer is a small scripted server on 127.0.0.1 (the client is the thing under test, so the
server may misbehave on purpose: answer late, split a reply, trickle it, hang up). One test also
drives the real service process, with a worker-like child frozen by SIGSTOP in the middle of its
wait. Assertions are on what came back (which reply, which exception), never on elapsed time,
except that a wait bounded by one timeout must end long before an unbounded one would.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable

import pytest

from takeover.run.service import ServiceClient


class ScriptedServer:
    """Accepts connections; each is handled by ``script(conn, request_line)`` per request line."""

    def __init__(self, script: Callable[[socket.socket, bytes, int], None]) -> None:
        self.script = script
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
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


@pytest.fixture
def serve():
    servers: list[ScriptedServer] = []

    def start(script):
        server = ScriptedServer(script)
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
    client = ServiceClient(server.port, timeout=0.5)
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
    client = ServiceClient(server.port, timeout=10.0)
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
    client = ServiceClient(server.port, timeout=0.5)
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
    client = ServiceClient(server.port, timeout=10.0)
    try:
        with pytest.raises(ConnectionError):
            client.call({"task": "a", "gen": 1})
        assert client.call({"task": "a", "gen": 6})["count"] == 6
    finally:
        client.close()
    assert server.connections == 2
