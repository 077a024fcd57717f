"""Planted bugs of the network era: PostgreSQL queues whose mistake only a network or a database fault
shows (``takeover selftest --db postgres --hosts N``, the detection bench with ``--hosts``).

Each is the PostgreSQL reference queue (takeover.queues.postgres_lease) with one mistake that real
queues have shipped, and that process faults alone rarely or never expose:

- :class:`AdvisoryLockLease` (GoodJob #989): the lease is a session-level advisory lock on the task, so
  the task is free again the moment the holder's *session* ends, whatever its lease says. A partition or
  a connection kill ends the session while the worker goes on with the task; another worker takes it
  over inside the first one's lease (``lease_exclusive``).
- :class:`BlindFinishRetry`: a finish that fails on a connection error is retried, on a new connection,
  until it goes through, by task id alone, without its generation. A worker cut off while finishing
  retries until the network heals; by then its lease ran out and another worker took the task (and may
  have finished it): the old generation's finish is accepted (``no_stale_commit``, ``single_finish``).
- :class:`AsyncCommit` (my choice): every session sets ``synchronous_commit = off``, a common throughput
  tip for queues on PostgreSQL. A commit is acknowledged before its WAL is flushed; a database crash
  loses the last fraction of a second of acknowledged finishes, which then show as running again and are
  claimed again (``no_reclaim_after_terminal``, ``state_matches_history``). No worker fault reaches it:
  a killed worker never takes the server's WAL buffers with it; only ``--db-restart-rate`` does.
"""

from __future__ import annotations

import time
from typing import Any

from takeover.contract import Claim
from takeover.queues.postgres_lease import PostgresLeaseQueue

# Advisory locks of this queue live in their own key space (the first of pg_try_advisory_lock's two keys).
LOCK_SPACE = 0x7A6B


class AdvisoryLockLease(PostgresLeaseQueue):
    """A task is claimable when nobody holds its advisory lock: pending, or running with its holder's session
    gone. The lease's end is written down but never consulted by a claim."""

    CANDIDATES = ("SELECT task_id FROM tasks WHERE state IN ('pending', 'running') ORDER BY state = 'pending', seq "
                  "LIMIT 32")
    TAKE = ("UPDATE tasks SET state = 'running', generation = generation + 1, lease_until = %(until)s, "
            "worker = %(worker)s WHERE task_id = %(task_id)s AND state IN ('pending', 'running') "
            "RETURNING task_id, generation, lease_until")

    def claim(self, worker: str, now: float, lease: float) -> Claim | None:
        conn = self._connection()
        params = self._claim_params(worker, now, lease)
        for (task_id,) in conn.execute(self.CANDIDATES).fetchall():
            got = conn.execute("SELECT pg_try_advisory_lock(%s, hashtext(%s))", (LOCK_SPACE, task_id)).fetchone()
            if not got or not got[0]:
                continue
            row = conn.execute(self.TAKE, {**params, "task_id": task_id}).fetchone()
            if row is not None:
                return (row[0], int(row[1]), float(row[2]))
            conn.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", (LOCK_SPACE, task_id))
        return None

    def _finish(self, params: dict[str, Any]) -> bool:
        accepted = super()._finish(params)
        self._connection().execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", (LOCK_SPACE, params["task_id"]))
        return accepted


class BlindFinishRetry(PostgresLeaseQueue):
    """A finish that raised a connection error is retried on a fresh connection, every RETRY_EVERY seconds for
    up to RETRY_FOR, by task id alone."""

    RETRY = "UPDATE tasks SET state = %(outcome)s, lease_until = NULL WHERE task_id = %(task_id)s"
    RETRY_FOR = 15.0
    RETRY_EVERY = 0.2

    def _finish(self, params: dict[str, Any]) -> bool:
        import psycopg

        try:
            return super()._finish(params)
        except psycopg.OperationalError:
            deadline = time.monotonic() + self.RETRY_FOR
            while True:
                try:
                    if self._conn is not None:
                        self._conn.close()
                    self._conn = None
                    return self._count(self.RETRY, params) == 1
                except psycopg.OperationalError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(self.RETRY_EVERY)


class AsyncCommit(PostgresLeaseQueue):
    """Every session commits asynchronously: an acknowledged commit may not survive a database crash."""

    def _connection(self) -> Any:
        fresh = self._conn is None or self._conn.broken or self._conn.closed
        conn = super()._connection()
        if fresh:
            conn.execute("SET synchronous_commit = off")
        return conn


# name -> the invariants expected to catch it.
PLANTED: dict[str, tuple[str, ...]] = {
    "AdvisoryLockLease": ("lease_exclusive",),
    "BlindFinishRetry": ("no_stale_commit", "single_finish"),
    "AsyncCommit": ("no_reclaim_after_terminal", "state_matches_history"),
}
# The stress options every run of these bugs gets besides --hosts N: the network faults alone (a database
# restart every 5 s, so that the one bug only a crash shows meets a few in a 20 s run).
FAULT_ARGS = ("--no-faults", "--partition-rate", "0.3", "--conn-kill-rate", "0.2", "--db-restart-rate", "0.2")
