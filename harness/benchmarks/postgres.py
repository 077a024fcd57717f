"""``takeover bench --db postgres``: the two queue figures of the bench, on PostgreSQL.

- ``queue_vs_raw``: the PostgreSQL reference queue's claim+finish against a bare psycopg loop running
  the very statements the queue runs (its ``CLAIM`` and ``FINISH``, same parameters, autocommit, one
  connection), each on a fresh database of the served server: the ratio is the queue's Python layer.
- ``workers4_vs_raw``: 4 workers of a real run (history, service, coordinator, no faults) on the same
  queue against the queue alone in 4 bare processes (and with one service call per task), as the
  SQLite figures are measured (takeover.benchmarks.workers4, with this module's databases).

The history overhead and the 1M-event check do not touch the queue; they are SQLite's bench alone.
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path
from typing import Any

from takeover._internal import db
from takeover.benchmarks import queue_raw, workers4
from takeover.benchmarks.timing import WALL
from takeover.contract import POSTGRES_REFERENCE_QUEUE
from takeover.queues.postgres_lease import PostgresLeaseQueue


class FreshDatabases:
    """``queue_raw.FreshQueues`` for PostgreSQL: a fresh database of the served server, ``tasks`` pending
    tasks registered, for every repetition; everything opened on them closed, and they dropped, at the end.
    (takeover.benchmarks.redis' is this one with its own queue and bare client.)"""

    QUEUE: Any = PostgresLeaseQueue

    def __init__(self, tasks: int) -> None:
        self.tasks = tasks
        self.n = 0
        self._stack = contextlib.ExitStack()
        self._folder = Path(self._stack.enter_context(tempfile.TemporaryDirectory(prefix="takeover-bench-pg-")))

    def path(self) -> str:
        """A fresh database's URL, its tasks registered (the name ``path`` is FreshQueues')."""
        self.n += 1
        url = self._stack.enter_context(db.current().database(self._folder, f"bench{self.n}"))
        queue = self.QUEUE(url)
        queue.register_many([f"t{i}" for i in range(self.tasks)], 0.0)
        queue.close()
        return url

    def track(self, handle: Any) -> Any:
        """Close ``handle`` (anything with ``close()``) at the end, as ``FreshQueues.track``; returns it."""
        self._stack.callback(handle.close)
        return handle

    def queue(self) -> Any:
        return self.track(self.QUEUE(self.path()))

    def raw(self) -> Any:
        """A bare autocommit connection to a fresh database, as the queue opens its own."""
        import psycopg

        conn = psycopg.connect(self.path(), autocommit=True)
        self._stack.callback(conn.close)
        return conn

    def __enter__(self) -> FreshDatabases:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()


def raw_pairs(conn: Any, pairs: int) -> int:
    """The baseline: the queue's own two statements with the queue's parameters, nothing around them."""
    execute = conn.execute
    claim, finish = PostgresLeaseQueue.CLAIM, PostgresLeaseQueue.FINISH
    now = 1.0
    params = {"now": now, "until": now + queue_raw.LEASE, "worker": "bench"}
    for _ in range(pairs):
        task_id, generation, _until = execute(claim, params).fetchone()
        execute(finish, {"outcome": "done", "task_id": task_id, "generation": generation, "now": now})
    return pairs


def queue_vs_raw(pairs: int, repetitions: int) -> dict[str, Any]:
    return queue_raw.measure(pairs, repetitions, fresh_queues=FreshDatabases, raw=raw_pairs, clock=WALL)


def workers4_vs_raw(seconds: float, repetitions: int, extra: int = 0) -> dict[str, Any]:
    return workers4.measure(seconds, repetitions, fresh_queues=FreshDatabases, raw_loop=raw_pairs,
                            queue=POSTGRES_REFERENCE_QUEUE, db=db.current().value, extra=extra)  # fmt: skip
