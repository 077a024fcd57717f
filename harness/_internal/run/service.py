"""The external service: its own OS process, reached over a real stream connection.

Why a process and a socket: the point of spec S4/S5 is that a worker cannot see whether a side
effect happened when the reply does not come back. Only a real connection with a real client
timeout reproduces that; the service commits each request to ``ledger.sqlite`` *before* replying,
so the ledger is ground truth whatever happens to the reply or to the worker.

A run's service listens on a Unix domain socket with an abstract name the kernel picks (Linux; see
:func:`listen_local`), elsewhere on TCP 127.0.0.1. The connection's semantics are the same either
way (a byte stream, a timeout, a hang-up); only the cost per round trip differs.

Protocol: one JSON object per line each way. Request ``{"task", "gen", "worker", "process", "key",
"lose"}``; reply ``{"reply": "ok" | "error", "result": ..., "count": N}``. ``lose: true`` is the
nemesis' lost reply: the action is performed and recorded with ``reply = 'lost'`` and no answer is
ever sent, so the worker only sees its timeout. Malformed requests get ``{"reply": "error"}`` and
are not recorded (nothing was performed). ``{"op": "lookup", "key": K}`` asks whether an action
with key K was performed (reconciliation): ``{"reply": "ok", "performed": true | false}``.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import sqlite3
import struct
import sys
import threading
import time
from dataclasses import dataclass
from typing import TypeAlias

import orjson

from takeover._internal.lifeline import die_with_parent, parent_alive
from takeover._internal.run.ledger import ActionRequest, Ledger


@dataclass(frozen=True)
class ServiceSpec:
    ledger_path: str
    remedy: str
    parent_pid: int


# Where a service listens: a TCP port on 127.0.0.1 (int), or an AF_UNIX address (bytes: an abstract
# name, starting with a NUL byte; str: a socket file).
ServiceAddress: TypeAlias = int | bytes | str


def listen() -> socket.socket:
    """Bound by the coordinator before the service starts, so the port is known and never races.

    TCP on 127.0.0.1: what ``takeover reconcile --service-port`` talks to. A run's own service uses
    :func:`listen_local`.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    return sock


def listen_local() -> socket.socket:
    """The run's service socket: a Unix domain socket on Linux, TCP on 127.0.0.1 elsewhere.

    Why: every task makes one round trip to the service, and on loopback TCP each one goes through
    the whole TCP/IP stack and a softirq on both sides; a Unix socket hands the bytes over directly
    and wakes the peer on the sender's CPU. Measured with 4 workers, about 20 us less CPU per task
    (worker and service together), with the same stream, timeout and hang-up behaviour.

    The name is abstract and chosen by the kernel (``bind("")``, Linux's autobind, as port 0 is for
    TCP): nothing is created in the run folder, nothing is left behind when the run is killed, and
    the 108-byte limit of socket file paths never meets a long ``--out``. Where that is not available
    (other systems, a sandbox without it), TCP.
    """
    if sys.platform.startswith("linux"):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind("")
            sock.listen(64)
            return sock
        except OSError:
            sock.close()
    return listen()


def listen_path(path: str) -> socket.socket:
    """A Unix socket bound to a file: for a run with hosts, whose workers live in network namespaces of their
    own, where an abstract name (which belongs to one namespace) cannot be reached (takeover._internal.net.hosts)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    sock.listen(64)
    return sock


def address_of(sock: socket.socket) -> ServiceAddress:
    """What a :class:`ServiceClient` connects to, for a socket from :func:`listen` or :func:`listen_local`."""
    name = sock.getsockname()
    return int(name[1]) if sock.family == socket.AF_INET else name


def service_main(spec: ServiceSpec, sock: socket.socket) -> None:
    """Entry point of the service process (multiprocessing target).

    Why one thread and a selector rather than a thread per connection: the workers' round trip
    to the service was most of their cycle, spent in thread wake-ups and GIL hand-offs around one
    lock. One loop reads every request that is ready, commits them all in one ledger transaction
    (group commit), and only then sends the replies: still committed before it replies.
    """
    die_with_parent(spec.parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the coordinator's to handle
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    ledger = Ledger(spec.ledger_path, spec.remedy)
    ledger.no_fsync()
    loop = _Loop(sock, ledger)
    try:
        while not stopping.is_set() and parent_alive(spec.parent_pid):
            batch = loop.poll(POLL_S)
            if stopping.is_set():
                break  # requests read after SIGTERM are not performed: nobody will see a reply
            if batch:
                loop.answer(batch)
    finally:
        loop.close()
        ledger.close()
    os._exit(0)


POLL_S = 0.2  # how often the loop looks at SIGTERM and the coordinator when nothing arrives
_RECV = 65536
_MALFORMED = b'{"reply":"error","result":"malformed"}\n'


class _Conn:
    """One worker connection: bytes read but not yet a whole line, bytes not yet sent."""

    __slots__ = ("sock", "inbuf", "outbuf", "closing", "events")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.inbuf = b""
        self.outbuf = b""
        self.closing = False  # the peer hung up: serve what it sent, then close
        self.events = selectors.EVENT_READ  # what the selector watches (changed only when needed)


class _Loop:
    """The service's single-threaded event loop over the listening socket and its connections."""

    def __init__(self, listener: socket.socket, ledger: Ledger) -> None:
        self.listener = listener
        self.ledger = ledger
        self.sel = selectors.DefaultSelector()
        listener.setblocking(False)
        self.sel.register(listener, selectors.EVENT_READ, None)

    def poll(self, timeout: float) -> list[tuple[_Conn, bytes]]:
        """Wait for activity; return every complete request line now available, in arrival order."""
        batch: list[tuple[_Conn, bytes]] = []
        for key, mask in self.sel.select(timeout):
            conn = key.data
            if conn is None:
                self._accept()
                continue
            if mask & selectors.EVENT_WRITE:
                self._flush(conn)
            if mask & selectors.EVENT_READ:
                self._read(conn, batch)
        return batch

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return  # e.g. the peer reset before we accepted: nothing to serve
            sock.setblocking(False)
            if sock.family == socket.AF_INET:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.sel.register(sock, selectors.EVENT_READ, _Conn(sock))

    def _read(self, conn: _Conn, batch: list[tuple[_Conn, bytes]]) -> None:
        try:
            data = conn.sock.recv(_RECV)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""  # reset by the peer: same as a hang-up
        if data:
            conn.inbuf += data
        else:
            conn.closing = True
            if conn.inbuf.strip():
                conn.inbuf += b"\n"  # a last request without its newline is still a request
        if b"\n" in conn.inbuf:
            *lines, conn.inbuf = conn.inbuf.split(b"\n")
            batch.extend((conn, line) for line in lines if line.strip())
        if conn.closing:
            # What the peer sent before hanging up is still performed (it is in the batch);
            # the replies have nowhere to go.
            self._drop(conn)

    def answer(self, batch: list[tuple[_Conn, bytes]]) -> None:
        """Perform the batch (one commit), then reply to each request in order."""
        try:
            replies = _handle_batch(batch, self.ledger)
        except sqlite3.Error:
            # Nothing of the batch was committed (rolled back): hang up on its senders, whose
            # workers record the outcome as unknown, and keep serving the others.
            for conn in {id(c): c for c, _ in batch}.values():
                self._drop(conn)
            return
        for (conn, _), reply in zip(batch, replies, strict=True):
            if reply is not None and not conn.closing:
                conn.outbuf += reply
        for conn in {id(c): c for c, _ in batch}.values():
            if conn.outbuf and not conn.closing:
                self._flush(conn)

    def _flush(self, conn: _Conn) -> None:
        try:
            sent = conn.sock.send(conn.outbuf)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            self._drop(conn)  # the worker died or gave up: what it asked for is in the ledger
            return
        conn.outbuf = conn.outbuf[sent:]
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if conn.outbuf else 0)
        if events != conn.events:  # a reply too big for the socket buffer: wait until writable
            conn.events = events
            self.sel.modify(conn.sock, events, conn)

    def _drop(self, conn: _Conn) -> None:
        conn.closing = True
        try:
            self.sel.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        conn.sock.close()

    def close(self) -> None:
        for key in list(self.sel.get_map().values()):
            if key.data is not None:
                key.data.sock.close()
        self.sel.close()
        self.listener.close()


def _handle_batch(batch: list[tuple[_Conn, bytes]], ledger: Ledger) -> list[bytes | None]:
    """Replies for a batch of request lines; every action of the batch committed together first.

    Lookups are answered after the commit, so they see every action of the batch (requests of
    one batch arrived concurrently; a client waits for its reply before it asks again).
    """
    replies: list[bytes | None] = [None] * len(batch)
    actions: list[tuple[int, ActionRequest]] = []
    lookups: list[tuple[int, str]] = []
    now = time.time()
    for i, (_, line) in enumerate(batch):
        try:
            req = orjson.loads(line)
            if isinstance(req, dict) and req.get("op") == "lookup":  # reconciliation (harness/_internal/reconcile.py)
                lookups.append((i, str(req["key"])))
                continue
            task, gen = str(req["task"]), int(req["gen"])
            worker, process, key = req.get("worker"), req.get("process"), req.get("key")
            if gen.bit_length() > 63 or (type(process) is int and process.bit_length() > 63):
                # SQLite's integers are 64-bit: the INSERT would raise OverflowError (not an
                # sqlite3.Error) and take the whole service down with every worker's batch.
                raise ValueError("beyond 64 bits")
        except (ValueError, KeyError, TypeError, AttributeError):
            replies[i] = _MALFORMED
            continue
        lose = bool(req.get("lose"))
        actions.append((i, ActionRequest(task, gen, worker, process, key, lose, now)))
    results = ledger.act_many([a for _, a in actions])
    for (i, req), result in zip(actions, results, strict=True):
        if not req.lose_reply:
            replies[i] = _reply_line(result.reply, result.result, result.performed_count)
    for i, key in lookups:
        performed = ledger.lookup(key)
        replies[i] = (json.dumps({"reply": "ok", "performed": performed}) + "\n").encode()
    return replies


def _reply_line(reply: str, result: str, count: int) -> bytes:
    """``{"reply":R,"result":X,"count":N}`` and a newline: the same JSON ``json.dumps`` would write.

    Why by hand: one per action on the service's hot path; ``reply`` and ``result`` come from the
    ledger's fixed vocabularies (no escaping needed), so only the count is formatted.
    """
    head = _REPLY_HEADS.get((reply, result))
    if head is None:
        text = f'{{"reply":{json.dumps(reply)},"result":{json.dumps(result)},"count":'
        head = _REPLY_HEADS[(reply, result)] = text.encode()
    return head + b"%d}\n" % count


_REPLY_HEADS: dict[tuple[str, str], bytes] = {}


class ServiceClient:
    """The worker's side: one connection, reopened after any timeout or error (as real clients do).

    Why ``recv`` into a buffer of our own rather than ``socket.makefile().readline()``: this runs
    once per task in every worker, and the file object's Python layers cost more than the call's
    own system calls. The service answers one line per request, in order, so a line is a reply.

    Why the timeout is the kernel's (``SO_RCVTIMEO``/``SO_SNDTIMEO`` on a blocking socket, on Linux)
    rather than ``settimeout``: a Python socket with a timeout polls before every send and every
    recv, so a round trip was four system calls (poll, send, poll, recv) instead of two. The kernel
    ends a wait that runs out with EAGAIN, raised here as the same ``TimeoutError``; the whole wait
    for a reply is still bounded by one timeout, however its bytes arrive.
    """

    def __init__(self, address: ServiceAddress, timeout: float) -> None:
        self.address = address
        self.timeout = timeout
        self._sock: socket.socket | None = None
        self._buf = b""

    def _connect(self) -> socket.socket:
        if isinstance(self.address, int):
            sock = socket.create_connection(("127.0.0.1", self.address), timeout=self.timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        else:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.settimeout(self.timeout)
                sock.connect(self.address)
            except BaseException:
                sock.close()
                raise
        if _KERNEL_TIMEOUTS:
            sock.settimeout(None)  # blocking: no poll of Python's before each call; the kernel bounds the waits
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, _timeval(self.timeout))
        _wait_at_most(sock, self.timeout)
        self._sock, self._buf = sock, b""
        return sock

    def call(self, request: dict) -> dict:
        """Send one request; raises TimeoutError when no reply comes within the timeout."""
        sock = self._sock or self._connect()
        try:
            sock.sendall(orjson.dumps(request, option=orjson.OPT_APPEND_NEWLINE))
            line = self._read_line(sock)
        except BlockingIOError:  # a kernel timeout ran out (the socket is blocking: nothing else says EAGAIN)
            self.reset()
            raise TimeoutError("timed out") from None
        except BaseException:
            self.reset()
            raise
        return orjson.loads(line)

    def _read_line(self, sock: socket.socket) -> bytes:
        """The next reply line; the whole wait is bounded by ``timeout``, however the bytes arrive."""
        buf = self._buf
        deadline = None
        shortened = False
        while (end := buf.find(b"\n")) < 0:
            if deadline is None:
                deadline = time.monotonic() + self.timeout
            else:  # a reply split over several segments: what is left of the one timeout
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("timed out")
                _wait_at_most(sock, left)
                shortened = True
            chunk = sock.recv(_RECV)
            if not chunk:
                raise ConnectionError("service closed the connection")
            buf += chunk
        if shortened:
            _wait_at_most(sock, self.timeout)
        self._buf = buf[end + 1 :]
        return buf[:end]

    def reset(self) -> None:
        if self._sock is not None:
            self._sock.close()
        self._sock, self._buf = None, b""

    close = reset


_KERNEL_TIMEOUTS = sys.platform.startswith("linux")


def _timeval(seconds: float) -> bytes:
    """``struct timeval`` for SO_RCVTIMEO/SO_SNDTIMEO; never all zeros, which would mean no timeout at all."""
    whole = int(seconds)
    return struct.pack("ll", whole, max(int((seconds - whole) * 1e6), 0 if whole else 1))


def _wait_at_most(sock: socket.socket, seconds: float) -> None:
    """Bound the next receives on ``sock`` by ``seconds`` (the kernel's timeout on Linux, Python's elsewhere)."""
    if _KERNEL_TIMEOUTS:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _timeval(seconds))
    else:
        sock.settimeout(seconds)
