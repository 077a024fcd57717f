"""The ceiling under ``workers4_vs_raw``: the reference queue alone in 4 processes on one file.

Why this figure exists: ``workers4_vs_raw`` compares a whole stress run (4 workers, the history,
the external service and its ledger, the coordinator) with the queue's SQL in ONE process. Part of
the gap is not takeover's at all: 4 processes contending for SQLite's single write lock on this
machine do not reach the single-process rate even with nothing around them (every commit by one
connection makes the others drop their page cache, and lock hand-overs cost sleeps and context
switches). This measures exactly that, so a reader can split the gap into SQLite's multi-process
ceiling (``queue4_vs_raw``) and takeover's own overhead on top of it (``workers4_vs_queue4``).

Each process calls the queue object's ``claim`` and ``finish`` back to back, nothing else: no
history, no service, no phase board. The processes start together at a barrier (start-up and
imports are not counted) and count the pairs they complete in the same window.

With ``service=True`` each pair also makes the one action a real worker makes between its claim
and its finish, on a real service (its own process, the run's socket, a committed ledger row per
action): what 4 workers could reach if takeover's own bookkeeping (history, phase board,
coordinator) cost nothing. Against it, a real run's rate measures that bookkeeping alone; against
the plain figure, the action's own cost shows (a round trip and a commit per task, in a fifth
process on the same cores).

With ``echo=True`` each pair makes the same round trip (the same client, request and reply line)
to a bare echo peer instead: a fifth process that answers every line at once and records nothing.
That is the cheapest round trip per task Python can make to another process here, so the floor
of any harness that performs its side effect elsewhere: the queue's own rate with it is the most a
run could reach with a service that costs nothing (see docs/benchmarks.md, ``make bench``).
"""

from __future__ import annotations

import multiprocessing
import os
import selectors
import signal
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

from takeover._internal.lifeline import die_with_parent, parent_alive
from takeover._internal.run.service import (
    ServiceAddress,
    ServiceClient,
    ServiceSpec,
    address_of,
    listen_local,
    service_main,
)
from takeover.contract import REFERENCE_QUEUE, open_queue

LEASE = 60.0
CLIENT_TIMEOUT = 5.0  # the bench run's --client-timeout (workers4.bench_config)
_BARRIER_TIMEOUT = 60.0  # generous: spawning 4 interpreters on a loaded 2-core machine


def _pairs_for(path: str, seconds: float, barrier: Any, results: Any, parent_pid: int, index: int,
               service: ServiceAddress | None, queue_spec: str = REFERENCE_QUEUE) -> None:  # fmt: skip
    """One process: open the queue, wait for the others, then claim+finish for ``seconds``
    (with one action on the service between the two when it is given).

    It dies with its parent (a SIGKILLed bench runs no clean-up, and these would otherwise go on
    claiming for the whole window or wait a minute at the barrier) and leaves Ctrl-C to it.
    """
    die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    queue = open_queue(queue_spec, path)
    client = None if service is None else ServiceClient(service, CLIENT_TIMEOUT)
    name = f"w{index}"
    pairs = 0
    try:
        barrier.wait(_BARRIER_TIMEOUT)
        start = time.perf_counter()
        end = start + seconds
        while True:
            now = time.time()
            claimed = queue.claim(name, now, LEASE)
            if claimed is None:
                break  # ran dry: the window ends early for this process (reported below)
            if client is not None:  # the request a worker sends (workloads/worker.py), answered after its commit
                client.call({"task": claimed[0], "gen": claimed[1], "worker": name, "process": index + 1,
                             "key": claimed[0], "lose": False})  # fmt: skip
            queue.finish(claimed[0], claimed[1], "done", time.time())
            pairs += 1
            if time.perf_counter() >= end:
                break
        results.put((pairs, time.perf_counter() - start))
    finally:
        if client is not None:
            client.close()
        queue.close()


def queue4_rate(path: str, seconds: float, processes: int = 4, *, service: bool = False, echo: bool = False,
                queue: str = REFERENCE_QUEUE) -> float:
    """Pairs per second of ``processes`` processes sharing the queue ``queue`` on the database ``path`` (a
    SQLite file, or a PostgreSQL URL; tasks registered); with ``service``, each pair also acts once on a
    real service with a fresh ledger; with ``echo``, it makes the same round trip to a bare echo peer."""
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(processes)
    results = ctx.Queue()
    with tempfile.TemporaryDirectory(prefix="takeover-bench-service-") as folder:
        server, address = _start_service(ctx, Path(folder), echo) if service or echo else (None, None)
        procs = [ctx.Process(target=_pairs_for, args=(path, seconds, barrier, results, os.getpid(), i, address, queue),
                             daemon=True) for i in range(processes)]  # fmt: skip
        got: list[tuple[int, float]] = []
        try:
            for p in procs:
                p.start()
            got = [results.get(timeout=_BARRIER_TIMEOUT + seconds + 30) for _ in procs]
        finally:
            for p in procs:
                if p.pid is None:
                    continue  # never started (start() of an earlier one raised): join() would mask why
                if len(got) == len(procs):
                    p.join(5.0)  # they all reported: let them close their queues
                if p.is_alive():
                    p.kill()  # interrupted or failed: no reason to wait out their window
                p.join()
            if server is not None:
                server.terminate()  # SIGTERM: it closes its ledger and leaves
                server.join(10.0)
                if server.is_alive():
                    server.kill()
                    server.join()
    pairs = sum(n for n, _ in got)
    window = max(elapsed for _, elapsed in got)
    return pairs / window if window > 0 else float("inf")


def _start_service(ctx: Any, folder: Path, echo: bool = False) -> tuple[Any, ServiceAddress]:
    """The service a run starts (its entry point and socket), on a fresh ledger in ``folder``; or, with
    ``echo``, the bare echo peer on the same kind of socket."""
    sock = listen_local()
    try:
        spec = ServiceSpec(str(folder / "ledger.sqlite"), "none", os.getpid())
        server = ctx.Process(target=_echo_main if echo else service_main, args=(spec, sock), daemon=True)
        server.start()
        return server, address_of(sock)
    finally:
        sock.close()  # the service holds its own copy


_ECHO_REPLY = b'{"reply":"ok","result":"performed","count":1}\n'  # what the service answers a first action


def _echo_main(spec: ServiceSpec, sock: socket.socket) -> None:
    """The floor's peer: one selector loop that answers each request line at once and records nothing.

    The same shape as the service's loop (a selector, non-blocking sockets, one reply line per request
    line) without the ledger: what remains is the round trip itself, the two processes' system calls and
    wake-ups. It dies with its parent and leaves on SIGTERM, as the service does.
    """
    die_with_parent(spec.parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    sel = selectors.DefaultSelector()
    sock.setblocking(False)
    sel.register(sock, selectors.EVENT_READ, None)
    while parent_alive(spec.parent_pid):
        for key, _ in sel.select(0.2):
            conn = key.fileobj
            if key.data is None:
                try:
                    conn, _ = sock.accept()
                except OSError:
                    continue
                conn.setblocking(False)
                sel.register(conn, selectors.EVENT_READ, True)
                continue
            try:
                data = conn.recv(65536)  # type: ignore[union-attr]
                if data:
                    conn.send(_ECHO_REPLY * data.count(b"\n"))  # type: ignore[union-attr]
                    continue
            except OSError:
                pass
            sel.unregister(conn)
            conn.close()  # type: ignore[union-attr]
    os._exit(0)
