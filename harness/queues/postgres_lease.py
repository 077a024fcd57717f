"""The reference lease queue on PostgreSQL: the spec's semantics, exactly, as the SQLite one has them.

``takeover.queues.postgres_lease:PostgresLeaseQueue``, the default queue with ``--db postgres`` or a
``postgresql://`` URL. Its constructor takes the URL of the run's database (takeover.contract).

Why each statement is shaped as it is:

- **The claim is one statement**: an ``UPDATE`` of the row that a sub-select picked ``FOR UPDATE SKIP
  LOCKED``. Two workers claiming at once lock different rows (the second skips the first's), and a row
  whose claim another worker committed meanwhile is re-checked against the ``WHERE`` before it is taken
  (PostgreSQL re-evaluates a locked row's conditions on its newest version), so one task is never handed
  to two holders. Expired leases come first, oldest expiry first (they have waited longest), then pending
  tasks in registration order; each side has a partial index, so a claim never walks finished rows.
- **The generation fences completion**: finish and extend match ``task_id`` *and* ``generation`` *and*
  ``state = 'running'`` *and* ``now < lease_until``.
- **Leases are checked against the ``now`` passed in**, never against the server's clock, so the
  harness's clock (logical in the scenarios) is the only one.
- **Terminal states are never claimed again**: the claim takes only ``pending`` rows and ``running``
  rows whose lease ran out.

Every call is one statement in autocommit: the queue never holds a transaction, and so never a row
lock, across calls; a worker frozen between two calls blocks nobody (the measurement is in
docs/howto/postgres.md: "A frozen holder"). A connection the server ended (a server restart, a session
killed by an administrator) is replaced on the next call; the call it broke fails, and its outcome is
unknown, as a killed worker's.
"""

from __future__ import annotations

from typing import Any

from takeover._internal.db import POSTGRES
from takeover.contract import OUTCOMES, Claim, SnapshotRow
from takeover.queues.sqlite_lease import RESOLUTIONS, check_lease, check_task_id, check_time

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS tasks (
        seq         BIGSERIAL NOT NULL,
        task_id     TEXT PRIMARY KEY,
        state       TEXT NOT NULL CHECK (state IN ('pending', 'running', 'done', 'uncertain')),
        generation  INTEGER NOT NULL DEFAULT 0,
        lease_until DOUBLE PRECISION,
        worker      TEXT,
        registered  DOUBLE PRECISION NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS tasks_pending ON tasks (seq) WHERE state = 'pending'",
    "CREATE INDEX IF NOT EXISTS tasks_running ON tasks (lease_until) WHERE state = 'running'",
)
# Every process opens the queue; two CREATE TABLE IF NOT EXISTS at the same instant can both find no
# table and one then fails on the catalog's unique index. One advisory lock (any constant) orders them.
SCHEMA_LOCK = 0x7A6B_0001

# The two picks, each a sub-select of its own so each uses its partial index. COALESCE evaluates its
# second argument only when the first is NULL, so the pending pick runs (and locks a row) only when no
# lease has run out.
PICK_EXPIRED = ("SELECT task_id FROM tasks WHERE state = 'running' AND lease_until <= %(now)s "
                "ORDER BY lease_until LIMIT 1 FOR UPDATE SKIP LOCKED")
PICK_PENDING = "SELECT task_id FROM tasks WHERE state = 'pending' ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED"


def claim_statement(expired: str = PICK_EXPIRED, pending: str = PICK_PENDING, bump: str = "generation + 1") -> str:
    """The claim: take the row one of the picks locked, raising its generation (``bump``: its new value)."""
    return (f"UPDATE tasks SET state = 'running', generation = {bump}, lease_until = %(until)s, "
            f"worker = %(worker)s WHERE task_id = COALESCE(({expired}), ({pending})) "
            "RETURNING task_id, generation, lease_until")

FINISH = ("UPDATE tasks SET state = %(outcome)s, lease_until = NULL WHERE task_id = %(task_id)s "
          "AND generation = %(generation)s AND state = 'running' AND %(now)s < lease_until")
EXTEND = ("UPDATE tasks SET lease_until = GREATEST(lease_until, %(until)s) WHERE task_id = %(task_id)s "
          "AND generation = %(generation)s AND state = 'running' AND %(now)s < lease_until RETURNING lease_until")
RESOLVE = {
    "done": "UPDATE tasks SET state = 'done', lease_until = NULL WHERE task_id = %(task_id)s "
            "AND generation = %(generation)s AND state = 'uncertain'",
    "pending": "UPDATE tasks SET state = 'pending', lease_until = NULL, worker = NULL WHERE task_id = %(task_id)s "
               "AND generation = %(generation)s AND state = 'uncertain'",
}  # fmt: skip
# Registering a known task changes nothing (not its state, generation or lease), whoever does it.
REGISTER = ("INSERT INTO tasks (task_id, state, generation, registered) VALUES (%(task_id)s, 'pending', 0, %(now)s) "
            "ON CONFLICT (task_id) DO NOTHING")
# A batch in one statement, in the batch's order (the pending side is claimed in registration order).
REGISTER_MANY = ("INSERT INTO tasks (task_id, state, generation, registered) "
                 "SELECT t, 'pending', 0, %(now)s FROM unnest(%(ids)s::text[]) WITH ORDINALITY AS batch(t, n) "
                 "ORDER BY n ON CONFLICT (task_id) DO NOTHING")
SNAPSHOT = "SELECT task_id, state, generation, lease_until FROM tasks ORDER BY seq"


class PostgresLeaseQueue:
    """The queue the spec describes, on one PostgreSQL table."""

    databases = (POSTGRES,)  # takeover.contract: it takes a postgresql:// URL, never a SQLite path

    CLAIM = claim_statement()
    FINISH = FINISH
    REGISTER = REGISTER
    REGISTER_MANY = REGISTER_MANY

    def __init__(self, db_url: str) -> None:
        self.db_url = db_url
        self._conn: Any = None
        conn = self._connection()
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            for statement in SCHEMA:
                conn.execute(statement)

    def _connection(self) -> Any:
        """The open connection; a new one when the server ended the last (the failed call stays failed)."""
        if self._conn is None or self._conn.broken or self._conn.closed:
            import psycopg

            self._conn = psycopg.connect(self.db_url, autocommit=True)
        return self._conn

    def _one(self, sql: str, params: dict[str, Any]) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self._connection().execute(sql, params).fetchone()
        return row

    def _count(self, sql: str, params: dict[str, Any]) -> int:
        return int(self._connection().execute(sql, params).rowcount)

    def register(self, task_id: str, now: float) -> None:
        check_task_id(task_id)
        check_time("now", now)
        self._count(self.REGISTER, {"task_id": task_id, "now": now})

    def register_many(self, task_ids: list[str], now: float) -> None:
        """Optional extension: one statement for a batch."""
        for task_id in task_ids:
            check_task_id(task_id)
        check_time("now", now)
        self._count(self.REGISTER_MANY, {"ids": list(task_ids), "now": now})

    def claim(self, worker: str, now: float, lease: float) -> Claim | None:
        check_time("now", now)
        check_lease(lease)
        row = self._one(self.CLAIM, self._claim_params(worker, now, lease))
        return None if row is None else (row[0], int(row[1]), float(row[2]))

    def _claim_params(self, worker: str, now: float, lease: float) -> dict[str, Any]:
        return {"now": now, "until": now + lease, "worker": worker}

    def finish(self, task_id: str, generation: int, outcome: str, now: float) -> bool:
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, got {outcome!r}")
        check_time("now", now)
        return self._finish({"outcome": outcome, "task_id": task_id, "generation": generation, "now": now})

    def _finish(self, params: dict[str, Any]) -> bool:
        return self._count(self.FINISH, params) == 1

    def extend(self, task_id: str, generation: int, now: float, lease: float) -> float | None:
        """Optional extension (heartbeat), fenced like finish; see SQLiteLeaseQueue.extend."""
        check_task_id(task_id)
        check_time("now", now)
        check_lease(lease)
        row = self._one(EXTEND, {"until": now + lease, "task_id": task_id, "generation": generation, "now": now})
        return None if row is None else float(row[0])

    def resolve(self, task_id: str, generation: int, resolution: str, now: float) -> bool:
        """Optional extension (reconciliation); see SQLiteLeaseQueue.resolve."""
        if resolution not in RESOLVE:
            raise ValueError(f"resolution must be one of {RESOLUTIONS}, got {resolution!r}")
        check_task_id(task_id)
        check_time("now", now)
        return self._count(RESOLVE[resolution], {"task_id": task_id, "generation": generation}) == 1

    def snapshot(self) -> list[SnapshotRow]:
        rows = self._connection().execute(SNAPSHOT).fetchall()
        return [(r[0], r[1], int(r[2]), None if r[3] is None else float(r[3])) for r in rows]

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
