"""The external service's own record of every action request: ``ledger.sqlite``.

Why a separate file owned by the service: the ledger is ground truth for side effects that the
queue cannot see (spec S4/S5). It is committed *before* the service replies, so a reply lost or a
worker killed after the request can never hide an action that happened.

The same :class:`Ledger` runs inside the stress run's service process and in the scenarios, so
both count side effects with one piece of code.

Remedies (how the service treats repeats):

* ``none``: every request is performed.
* ``idempotency-key``: a request whose key was already performed is answered from the record
  (``result = deduplicated``, ``performed = 0``).
* ``fencing``: a request whose generation is lower than the highest already seen for its task
  is refused (``result = refused``, ``performed = 0``, reply ``error``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from harness.sqlite_util import open_wal

LEDGER_FILE = "ledger.sqlite"
REMEDIES = ("none", "idempotency-key", "fencing")
REPLIES = ("ok", "lost", "error")

SCHEMA = """
CREATE TABLE IF NOT EXISTS actions (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id    TEXT NOT NULL,
    generation INTEGER NOT NULL,
    worker     TEXT,
    process    INTEGER,
    t          REAL NOT NULL,
    reply      TEXT NOT NULL CHECK (reply IN ('ok', 'lost', 'error')),
    performed  INTEGER NOT NULL CHECK (performed IN (0, 1)),
    result     TEXT NOT NULL CHECK (result IN ('performed', 'deduplicated', 'refused')),
    key        TEXT,
    remedy     TEXT NOT NULL DEFAULT 'none'
);
CREATE INDEX IF NOT EXISTS actions_by_task ON actions (task_id, generation);
CREATE INDEX IF NOT EXISTS actions_by_key ON actions (key)
"""


@dataclass(frozen=True)
class ActionResult:
    """What the service did with one request. ``reply`` is what it *intends* to send back."""

    seq: int
    performed: bool
    result: str  # performed | deduplicated | refused
    reply: str  # ok | lost | error
    count: int  # performed actions for this task after this request


class Ledger:
    """One connection to ``ledger.sqlite``; safe to open from several processes at once."""

    def __init__(self, path: str, remedy: str = "none") -> None:
        if remedy not in REMEDIES:
            raise ValueError(f"remedy must be one of {REMEDIES}, got {remedy!r}")
        self.path = path
        self.remedy = remedy
        self._conn = open_wal(path, SCHEMA)

    def act(
        self,
        task_id: str,
        generation: int,
        *,
        worker: str | None = None,
        process: int | None = None,
        key: str | None = None,
        lose_reply: bool = False,
        t: float | None = None,
    ) -> ActionResult:
        """Decide, perform (synthetically) and record one action, committed before returning."""
        conn = self._conn
        t = time.time() if t is None else t
        conn.execute("BEGIN IMMEDIATE")
        try:
            result = "performed"
            if self.remedy == "idempotency-key" and key is not None:
                seen = conn.execute(
                    "SELECT 1 FROM actions WHERE key = ? AND performed = 1 LIMIT 1", (key,)
                ).fetchone()
                if seen:
                    result = "deduplicated"
            elif self.remedy == "fencing":
                (highest,) = conn.execute(
                    "SELECT MAX(generation) FROM actions WHERE task_id = ?", (task_id,)
                ).fetchone()
                if highest is not None and generation < highest:
                    result = "refused"
            performed = result == "performed"
            reply = "lost" if lose_reply else ("error" if result == "refused" else "ok")
            seq = conn.execute(
                "INSERT INTO actions (task_id, generation, worker, process, t, reply, performed, result, key, remedy)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (task_id, generation, worker, process, t, reply, int(performed), result, key, self.remedy),
            ).lastrowid
            (count,) = conn.execute(
                "SELECT COUNT(*) FROM actions WHERE task_id = ? AND performed = 1", (task_id,)
            ).fetchone()
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return ActionResult(seq=seq, performed=performed, result=result, reply=reply, count=count)

    def performed_count(self, task_id: str) -> int:
        (count,) = self._conn.execute(
            "SELECT COUNT(*) FROM actions WHERE task_id = ? AND performed = 1", (task_id,)
        ).fetchone()
        return count

    def lookup(self, key: str) -> bool:
        """Did an action with this idempotency key happen? (reconciliation of ``uncertain``)."""
        return (
            self._conn.execute("SELECT 1 FROM actions WHERE key = ? AND performed = 1 LIMIT 1", (key,)).fetchone()
            is not None
        )

    def close(self) -> None:
        self._conn.close()
