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
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from typing import Any

from takeover.queues.sqlite_lease import SQLiteLeaseQueue
from takeover.run.lifeline import die_with_parent

LEASE = 60.0
_BARRIER_TIMEOUT = 60.0  # generous: spawning 4 interpreters on a loaded 2-core machine


def _pairs_for(path: str, seconds: float, barrier: Any, results: Any, parent_pid: int) -> None:
    """One process: open the queue, wait for the others, then claim+finish for ``seconds``.

    It dies with its parent (a SIGKILLed bench runs no clean-up, and these would otherwise go on
    claiming for the whole window or wait a minute at the barrier) and leaves Ctrl-C to it.
    """
    die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    queue = SQLiteLeaseQueue(path)
    pairs = 0
    try:
        barrier.wait(_BARRIER_TIMEOUT)
        start = time.perf_counter()
        end = start + seconds
        while True:
            now = time.time()
            claimed = queue.claim("bench", now, LEASE)
            if claimed is None:
                break  # ran dry: the window ends early for this process (reported below)
            queue.finish(claimed[0], claimed[1], "done", time.time())
            pairs += 1
            if time.perf_counter() >= end:
                break
        results.put((pairs, time.perf_counter() - start))
    finally:
        queue.close()


def queue4_rate(path: str, seconds: float, processes: int = 4) -> float:
    """Pairs per second of ``processes`` processes sharing the queue file at ``path`` (tasks registered)."""
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(processes)
    results = ctx.Queue()
    procs = [ctx.Process(target=_pairs_for, args=(path, seconds, barrier, results, os.getpid()), daemon=True)
             for _ in range(processes)]  # fmt: skip
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
    pairs = sum(n for n, _ in got)
    window = max(elapsed for _, elapsed in got)
    return pairs / window if window > 0 else float("inf")
