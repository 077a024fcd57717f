"""The reference lease queue: the spec's semantics, exactly, on one SQLite table in WAL mode.

Every claim and every finish is one transaction that takes the write lock up front
(``BEGIN IMMEDIATE``), so two processes can never read the same claimable row and both update it,
and a deferred read-then-write never fails with "database is locked" under contention.
The index on ``(state, lease_until)`` keeps claims from scanning finished rows, so a long run does
not slow down as ``done`` rows pile up. The claim queries name it with ``INDEXED BY``: without
that, statistics from an ``ANALYZE`` / ``PRAGMA optimize`` taken on a small or all-pending table
can make the planner prefer a full scan, which then walks every ``done`` row on each claim; with
it, a plan that cannot use the index fails loudly at prepare time instead of silently slowing.

Arguments are validated because SQLite stores NaN as NULL: a NaN ``now`` would make a claim write
``lease_until = NULL`` (a running task no claim can ever take over) and make ``register`` drop the
task silently (``INSERT OR IGNORE`` swallows the NOT NULL failure).
"""

from __future__ import annotations

import math

from takeover._internal.sqlite_util import open_wal, retry_busy, write_transaction
from takeover.contract import OUTCOMES, Claim, SnapshotRow

SCHEMA = """
CREATE TABLE IF NOT EXISTS tasks (
    task_id     TEXT PRIMARY KEY,
    state       TEXT NOT NULL CHECK (state IN ('pending', 'running', 'done', 'uncertain')),
    generation  INTEGER NOT NULL DEFAULT 0,
    lease_until REAL,
    worker      TEXT,
    registered  REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS tasks_by_state ON tasks (state, lease_until)
"""

# Expired leases first (oldest expiry first: they have waited longest, which bounds orphan
# recovery), then pending tasks in registration order.
_PICK_EXPIRED = (
    "SELECT task_id FROM tasks INDEXED BY tasks_by_state"
    " WHERE state = 'running' AND lease_until <= ? ORDER BY lease_until LIMIT 1"
)
# No ORDER BY: entries of the index with equal (state, lease_until = NULL) are stored in rowid
# order, so the first hit is the oldest pending task; "ORDER BY rowid" would make SQLite sort
# every pending row on each claim (a temp B-tree), 10x slower with 20k pending tasks.
_PICK_PENDING = "SELECT task_id FROM tasks INDEXED BY tasks_by_state WHERE state = 'pending' LIMIT 1"
_TAKE = (
    "UPDATE tasks SET state = 'running', generation = generation + 1, lease_until = ?, worker = ? "
    "WHERE task_id = ? RETURNING generation, lease_until"
)
# Heartbeat: only the current holder, only while its lease is still valid; never shortens a lease.
_EXTEND = (
    "UPDATE tasks SET lease_until = MAX(lease_until, ?) "
    "WHERE task_id = ? AND generation = ? AND state = 'running' AND ? < lease_until RETURNING lease_until"
)
# Reconciliation: only an ``uncertain`` task of that generation; the generation stays, so a retry's
# claim raises it as every claim does and an old holder stays fenced.
_RESOLVE = {
    "done": "UPDATE tasks SET state = 'done', lease_until = NULL WHERE task_id = ? AND generation = ?"
    " AND state = 'uncertain'",
    "pending": "UPDATE tasks SET state = 'pending', lease_until = NULL, worker = NULL WHERE task_id = ?"
    " AND generation = ? AND state = 'uncertain'",
}
RESOLUTIONS = tuple(_RESOLVE)

_FINISH = (
    "UPDATE tasks SET state = ?, lease_until = NULL "
    "WHERE task_id = ? AND generation = ? AND state = 'running' AND ? < lease_until"
)


def check_time(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number of seconds, got {value!r}")


def check_lease(lease: float) -> None:
    check_time("lease", lease)
    if lease <= 0:
        # A lease that has run out when granted could never be finished (now < lease_until).
        raise ValueError(f"lease must be positive, got {lease!r}")


def check_task_id(task_id: str) -> None:
    if not isinstance(task_id, str) or not task_id:
        raise ValueError(f"task_id must be a non-empty string, got {task_id!r}")


class SQLiteLeaseQueue:
    """``takeover.queues.sqlite_lease:SQLiteLeaseQueue`` — the queue the spec describes."""

    databases = ("sqlite",)  # takeover.contract: it takes a SQLite path (takeover.queues.postgres_lease: a URL)

    # OR IGNORE: registering a known task again must change nothing (not its state, its generation
    # or its lease), whoever registers it and however often.
    REGISTER = "INSERT OR IGNORE INTO tasks (task_id, state, generation, registered) VALUES (?, 'pending', 0, ?)"
    # WAL with synchronous=NORMAL, the setting of almost every SQLite queue guide: a commit survives any
    # crash of the process, but the WAL is synced only at a checkpoint, so a power cut or an OS crash
    # rolls back every commit since the last one (see SQLiteLeaseQueueFull).
    SYNCHRONOUS = "NORMAL"

    def __init__(self, db_path: str) -> None:
        self.db_path = db_path
        self._conn = open_wal(db_path, SCHEMA, synchronous=self.SYNCHRONOUS, spin_for_lock=True)

    def register(self, task_id: str, now: float) -> None:
        check_task_id(task_id)
        check_time("now", now)
        with write_transaction(self._conn) as conn:
            conn.execute(self.REGISTER, (task_id, now))

    def register_many(self, task_ids: list[str], now: float) -> None:
        """Optional extension: one transaction for a batch, so set-up of 10k tasks takes milliseconds."""
        for task_id in task_ids:
            check_task_id(task_id)
        check_time("now", now)
        with write_transaction(self._conn) as conn:
            conn.executemany(self.REGISTER, [(task_id, now) for task_id in task_ids])

    def claim(self, worker: str, now: float, lease: float) -> Claim | None:
        check_time("now", now)
        check_lease(lease)
        with write_transaction(self._conn) as conn:
            row = conn.execute(_PICK_EXPIRED, (now,)).fetchone() or conn.execute(_PICK_PENDING).fetchone()
            if row is None:
                return None
            task_id = row[0]
            generation, lease_until = conn.execute(_TAKE, (now + lease, worker, task_id)).fetchone()
        # RETURNING yields the bound value before the column's REAL affinity applies; snapshot()
        # reads the stored REAL. Return the same float both ways.
        return task_id, int(generation), float(lease_until)

    def finish(self, task_id: str, generation: int, outcome: str, now: float) -> bool:
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, got {outcome!r}")
        check_time("now", now)
        with write_transaction(self._conn) as conn:
            accepted = conn.execute(_FINISH, (outcome, task_id, generation, now)).rowcount == 1
        return accepted

    def extend(self, task_id: str, generation: int, now: float, lease: float) -> float | None:
        """Optional extension (heartbeat): push the lease to ``now + lease`` while it is still held.

        Fenced like finish: a holder whose lease already ran out (``now >= lease_until``) or whose
        generation was superseded gets None and must stop before acting, because another worker
        may own the task now. Returns the new ``lease_until``.
        """
        check_task_id(task_id)
        check_time("now", now)
        check_lease(lease)
        with write_transaction(self._conn) as conn:
            row = conn.execute(_EXTEND, (now + lease, task_id, generation, now)).fetchone()
        return None if row is None else float(row[0])

    def resolve(self, task_id: str, generation: int, resolution: str, now: float) -> bool:
        """Optional extension (reconciliation): move an ``uncertain`` task of this generation to
        ``done`` (its action is known to have happened) or back to ``pending`` (known not to have
        happened: claimable again for a retry). False when the task is not uncertain at that
        generation, so two reconcilers, or a stale answer, cannot undo each other's work.
        """
        if resolution not in _RESOLVE:
            raise ValueError(f"resolution must be one of {RESOLUTIONS}, got {resolution!r}")
        check_task_id(task_id)
        check_time("now", now)
        with write_transaction(self._conn) as conn:
            changed = conn.execute(_RESOLVE[resolution], (task_id, generation)).rowcount == 1
        return changed

    def snapshot(self) -> list[SnapshotRow]:
        query = "SELECT task_id, state, generation, lease_until FROM tasks ORDER BY rowid"
        rows = retry_busy(lambda: self._conn.execute(query).fetchall())
        return [(r[0], r[1], int(r[2]), r[3]) for r in rows]

    def close(self) -> None:
        self._conn.close()

    def _rollback(self) -> None:
        """Kept for subclasses (harness/queues/planted.py) that manage their own transactions."""
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")


class SQLiteLeaseQueueFull(SQLiteLeaseQueue):
    """``takeover.queues.sqlite_lease:SQLiteLeaseQueueFull`` — the same queue with ``synchronous=FULL``.

    Every commit syncs the WAL before it returns, so a claim or a finish the caller saw accepted
    survives a power cut or an OS crash: no acknowledged finish undone, no generation handed out twice.
    The price is one fsync per claim, finish, extend and registration (the measured ratio, ``full_vs_normal``:
    docs/howto/power-loss.md and docs/benchmarks.md).
    """

    SYNCHRONOUS = "FULL"
