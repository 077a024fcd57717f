"""The external service: its own OS process, reached over a real TCP connection on 127.0.0.1.

Why a process and a socket: the point of spec S4/S5 is that a worker cannot see whether a side
effect happened when the reply does not come back. Only a real connection with a real client
timeout reproduces that; the service commits each request to ``ledger.sqlite`` *before* replying,
so the ledger is ground truth whatever happens to the reply or to the worker.

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
import signal
import socket
import threading
import time
from dataclasses import dataclass

from harness.ledger import Ledger
from harness.lifeline import die_with_parent, parent_alive


@dataclass(frozen=True)
class ServiceSpec:
    ledger_path: str
    remedy: str
    parent_pid: int


def listen() -> socket.socket:
    """Bound by the coordinator before the service starts, so the port is known and never races."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    return sock


def service_main(spec: ServiceSpec, sock: socket.socket) -> None:
    """Entry point of the service process (multiprocessing target)."""
    die_with_parent(spec.parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the coordinator's to handle
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    ledger = Ledger(spec.ledger_path, spec.remedy)
    lock = threading.Lock()
    sock.settimeout(0.2)
    try:
        while not stopping.is_set() and parent_alive(spec.parent_pid):
            try:
                conn, _ = sock.accept()
            except TimeoutError:
                continue
            except OSError:
                if stopping.is_set():
                    break
                raise
            conn.settimeout(None)
            threading.Thread(target=_serve, args=(conn, ledger, lock, stopping), daemon=True).start()
    finally:
        with lock:
            ledger.close()
        sock.close()
    os._exit(0)  # daemon threads blocked in recv must not hold the process up


def _serve(conn: socket.socket, ledger: Ledger, lock: threading.Lock, stopping: threading.Event) -> None:
    reader = conn.makefile("rb")
    try:
        for line in reader:
            if stopping.is_set():
                return
            reply = _handle(line, ledger, lock)
            if reply is not None:
                conn.sendall(reply)
    except OSError:
        pass  # the worker died or gave up: what it asked for is already in the ledger
    finally:
        reader.close()
        conn.close()


def _handle(line: bytes, ledger: Ledger, lock: threading.Lock) -> bytes | None:
    try:
        req = json.loads(line)
        if isinstance(req, dict) and req.get("op") == "lookup":  # reconciliation (harness/reconcile.py)
            with lock:
                performed = ledger.lookup(str(req["key"]))
            return (json.dumps({"reply": "ok", "performed": performed}) + "\n").encode()
        task, gen = str(req["task"]), int(req["gen"])
    except (ValueError, KeyError, TypeError):
        return b'{"reply":"error","result":"malformed"}\n'
    lose = bool(req.get("lose"))
    with lock:
        result = ledger.act(
            task,
            gen,
            worker=req.get("worker"),
            process=req.get("process"),
            key=req.get("key"),
            lose_reply=lose,
            t=time.time(),
        )
    if lose:
        return None
    return (json.dumps({"reply": result.reply, "result": result.result, "count": result.count}) + "\n").encode()


class ServiceClient:
    """The worker's side: one connection, reopened after any timeout or error (as real clients do)."""

    def __init__(self, port: int, timeout: float) -> None:
        self.port = port
        self.timeout = timeout
        self._sock: socket.socket | None = None
        self._reader = None

    def _connect(self) -> None:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=self.timeout)
        sock.settimeout(self.timeout)
        self._sock, self._reader = sock, sock.makefile("rb")

    def call(self, request: dict) -> dict:
        """Send one request; raises TimeoutError when no reply comes within the timeout."""
        if self._sock is None:
            self._connect()
        assert self._sock is not None and self._reader is not None
        try:
            self._sock.sendall((json.dumps(request, separators=(",", ":")) + "\n").encode())
            line = self._reader.readline()
        except BaseException:
            self.reset()
            raise
        if not line:
            self.reset()
            raise ConnectionError("service closed the connection")
        return json.loads(line)

    def reset(self) -> None:
        if self._reader is not None:
            try:
                self._reader.close()
            except OSError:
                pass
        if self._sock is not None:
            self._sock.close()
        self._sock = self._reader = None

    close = reset
