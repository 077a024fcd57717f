"""A test queue (importable by spawned workers via PYTHONPATH): the reference queue without the
optional ``extend`` and ``resolve`` methods, as a user's minimal queue would be."""

from __future__ import annotations

from takeover.queues.sqlite_lease import SQLiteLeaseQueue


class BareQueue:
    """Only the five contract methods, delegated; no optional extensions."""

    def __init__(self, db_path: str) -> None:
        self._q = SQLiteLeaseQueue(db_path)

    def register(self, task_id, now):
        return self._q.register(task_id, now)

    def claim(self, worker, now, lease):
        return self._q.claim(worker, now, lease)

    def finish(self, task_id, generation, outcome, now):
        return self._q.finish(task_id, generation, outcome, now)

    def snapshot(self):
        return self._q.snapshot()

    def close(self):
        return self._q.close()
