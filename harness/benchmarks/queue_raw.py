"""``queue_vs_raw``: the reference queue against a bare sqlite3 loop running the same SQL.

Why: the queue's Python layer (method calls, error handling, the contract's shape) must cost
little next to SQLite itself, or takeover would measure its own overhead instead of the queue.
The raw loop issues exactly the statements the queue issues, in the same transactions, with the
same pragmas, so the ratio isolates the Python layer.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from takeover._internal.sqlite_util import open_wal
from takeover.benchmarks.timing import CPU, Turns
from takeover.contract import LeaseQueue
from takeover.queues import sqlite_lease
from takeover.queues.sqlite_lease import SQLiteLeaseQueue

LEASE = 30.0
# Pairs per turn (Turns): about a tenth of a second of SQLite on a quiet machine, long enough that one
# preemption does not decide a turn (turns of 250 pairs spread 0.15-6.0 at a load of 10), short enough that
# both sides of a round see the same machine.
TURN = 1000


class Closeable(Protocol):
    def close(self) -> None: ...


class FreshQueues:
    """A new queue file with ``tasks`` pending tasks for every repetition (no warm rows left over).

    It also owns what the benchmark opens on those files (queues, raw connections, history
    writers), so one ``with`` closes them all and removes the folder, whatever went wrong.
    """

    def __init__(self, tasks: int) -> None:
        self.tasks = tasks
        self.dir = Path(tempfile.mkdtemp(prefix="takeover-bench-"))
        self.n = 0
        self._opened: list[Closeable] = []

    def path(self) -> str:
        self.n += 1
        path = str(self.dir / f"q{self.n}.sqlite")
        queue = SQLiteLeaseQueue(path)
        queue.register_many([f"t{i}" for i in range(self.tasks)], 0.0)
        queue.close()
        return path

    def track(self, handle: Closeable) -> Any:
        """Close ``handle`` (anything with ``close()``) at clean-up; returns it."""
        self._opened.append(handle)
        return handle

    def queue(self) -> SQLiteLeaseQueue:
        """The reference queue on a fresh file."""
        return self.track(SQLiteLeaseQueue(self.path()))

    def raw(self) -> sqlite3.Connection:
        """A bare connection on a fresh file, set up as the queue sets up its own."""
        return self.track(open_wal(self.path(), sqlite_lease.SCHEMA))

    def cleanup(self) -> None:
        for handle in self._opened:
            handle.close()
        self._opened.clear()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> FreshQueues:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()


def queue_pairs(queue: LeaseQueue, pairs: int) -> int:
    """The candidate: claim + finish through the queue object's contract methods."""
    now = 1.0
    for _ in range(pairs):
        # A bench queue holds a task for every pair, so the claim is never None; no check in the timed
        # loop, which the bare-SQL baseline does not pay either.
        task_id, generation, _until = queue.claim("bench", now, LEASE)  # type: ignore[misc]
        queue.finish(task_id, generation, "done", now)
    return pairs


def raw_pairs(conn: sqlite3.Connection, pairs: int) -> int:
    """The baseline: the queue's own statements, in the same transactions, with nothing around them."""
    execute = conn.execute
    now = 1.0
    for _ in range(pairs):
        execute("BEGIN IMMEDIATE")
        row = execute(sqlite_lease._PICK_EXPIRED, (now,)).fetchone() or execute(
            sqlite_lease._PICK_PENDING
        ).fetchone()
        generation, _until = execute(sqlite_lease._TAKE, (now + LEASE, "bench", row[0])).fetchone()
        execute("COMMIT")
        execute("BEGIN IMMEDIATE")
        execute(sqlite_lease._FINISH, ("done", row[0], generation, now))
        execute("COMMIT")
    return pairs


def measure(
    pairs: int = 5000,
    repetitions: int = 5,
    fresh_queues: Any = FreshQueues,
    raw: Callable[[Any, int], int] = raw_pairs,
    turn: int = TURN,
    clock: str = CPU,
) -> dict[str, Any]:
    """Return the ratio and its absolute figures: each repetition opens the queue and the bare connection on
    fresh databases and times them in alternating turns of ``turn`` pairs, ``pairs`` pairs each
    (:class:`takeover.benchmarks.timing.Turns`), by this process's CPU time (``clock``; the wall-clock
    ratio beside it). ``fresh_queues`` and ``raw`` are the database's: takeover.benchmarks.postgres gives
    PostgreSQL's, with ``clock=WALL`` (its server's work is in another process)."""
    turns = Turns(clock)
    size = min(turn, pairs)
    with fresh_queues(pairs + 2 * size + 10) as fresh:
        for _ in range(repetitions):
            queue, conn = fresh.queue(), fresh.raw()
            turns.run(partial(queue_pairs, queue, size), partial(raw, conn, size), max(1, pairs // size))
    return turns.figures("queue_vs_raw", "queue_pairs_per_s", "raw_pairs_per_s")
