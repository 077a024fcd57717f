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

import sqlite3
import time
from collections.abc import Sequence
from typing import NamedTuple

from takeover._internal.options import REMEDIES
from takeover._internal.sqlite_util import open_wal, write_transaction

REPLIES = ("ok", "lost", "error")

SCHEMA = """
CREATE TABLE IF NOT EXISTS actions (
    seq        INTEGER PRIMARY KEY,
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


class ActionRequest(NamedTuple):
    """One action request as the service received it (the arguments of :meth:`Ledger.act`).

    A NamedTuple rather than a frozen dataclass: one is built per action on the service's hot
    path, and a frozen dataclass's ``__init__`` costs several times more.
    """

    task_id: str
    generation: int
    worker: str | None = None
    process: int | None = None
    key: str | None = None
    lose_reply: bool = False
    t: float | None = None


class ActionResult(NamedTuple):
    """What the service did with one request. ``reply`` is what it *intends* to send back."""

    seq: int
    performed: bool
    result: str  # performed | deduplicated | refused
    reply: str  # ok | lost | error
    performed_count: int  # performed actions for this task after this request (tuple.count is a method)


# Bound on the per-task memo (see Ledger): a soak run of millions of tasks must not look like a
# leak in the service's RSS; past the bound the memo starts over and misses read the file again.
MEMO_LIMIT = 50_000

_INSERT = (
    "INSERT INTO actions (task_id, generation, worker, process, t, reply, performed, result, key, remedy)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
# Was an action with this idempotency key performed? (the remedy, and reconciliation's lookup)
_PERFORMED_KEY = "SELECT 1 FROM actions WHERE key = ? AND performed = 1 LIMIT 1"


class Ledger:
    """One connection to ``ledger.sqlite``; safe to open from several processes at once.

    Why a memo of per-task counts and highest generations: the service answers every request
    with the task's performed count, and ``SELECT COUNT(*)`` per action was a third of the
    service's time. The memo is only trusted while nobody else wrote the file: ``PRAGMA
    data_version`` (checked inside each write transaction) changes when another connection
    commits, and then the memo is dropped. A fresh Ledger (a restarted service) starts empty and
    fills it from the file on demand, so it never trusts what it did not read.

    The memo is *complete* (a task missing from it has no rows at all, so a miss needs no query)
    when this Ledger found the file empty and nobody else has written since: the usual case for a
    run's service, which then reads nothing per action. Every task is new once, so without this a
    ``COUNT(*)`` per action remained. ``seq`` is a plain ``INTEGER PRIMARY KEY`` (rows are never
    deleted, so it still grows by one per row) rather than AUTOINCREMENT, whose bookkeeping table
    is one more page written per commit.
    """

    def __init__(self, path: str, remedy: str = "none") -> None:
        if remedy not in REMEDIES:
            raise ValueError(f"remedy must be one of {REMEDIES}, got {remedy!r}")
        self.path = path
        self.remedy = remedy
        self._conn = open_wal(path, SCHEMA)
        self._counts: dict[str, int] = {}
        self._highest: dict[str, int] = {}
        self._data_version: int | None = None
        self._complete = False  # see the class docstring

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
        return self.act_many([ActionRequest(task_id, generation, worker, process, key, lose_reply, t)])[0]

    def act_many(self, requests: Sequence[ActionRequest]) -> list[ActionResult]:
        """Decide and record several actions in order, in ONE transaction committed before returning.

        Why: group commit. The service gathers every request that is ready and commits them
        together before sending any reply, so "committed before it replies" still holds while the
        fixed cost of a write transaction is paid once per batch instead of once per request.
        Each request sees the ones before it exactly as if they had been committed one by one.
        """
        if not requests:
            return []
        try:
            with write_transaction(self._conn) as conn:
                (version,) = conn.execute("PRAGMA data_version").fetchone()
                if self._data_version is None:
                    self._complete = conn.execute("SELECT 1 FROM actions LIMIT 1").fetchone() is None
                elif version != self._data_version or len(self._counts) > MEMO_LIMIT or len(self._highest) > MEMO_LIMIT:
                    self._forget()
                self._data_version = version
                results = [self._act_in_transaction(conn, r) for r in requests]
        except BaseException:
            self._forget()  # the memo may hold rows that were rolled back
            raise
        return results

    def _forget(self) -> None:
        """Drop the memo: from now on it is filled from the file again (see the class docstring)."""
        self._counts.clear()
        self._highest.clear()
        self._complete = False

    def _act_in_transaction(self, conn: sqlite3.Connection, req: ActionRequest) -> ActionResult:
        task_id, generation, key = req.task_id, req.generation, req.key
        t = time.time() if req.t is None else req.t
        result = "performed"
        if self.remedy == "idempotency-key" and key is not None:
            if conn.execute(_PERFORMED_KEY, (key,)).fetchone():
                result = "deduplicated"
        elif self.remedy == "fencing":
            highest = self._highest.get(task_id)
            if highest is None and not self._complete:
                (highest,) = conn.execute(
                    "SELECT MAX(generation) FROM actions WHERE task_id = ?", (task_id,)
                ).fetchone()
            if highest is not None and generation < highest:
                result = "refused"
            self._highest[task_id] = generation if highest is None else max(highest, generation)
        performed = result == "performed"
        reply = "lost" if req.lose_reply else ("error" if result == "refused" else "ok")
        count = self._counts.get(task_id)
        if count is None:
            count = 0 if self._complete else self._count_in_file(conn, task_id)  # before our INSERT: add ours below
        seq = conn.execute(
            _INSERT,
            (task_id, generation, req.worker, req.process, t, reply, int(performed), result, key, self.remedy),
        ).lastrowid
        count += int(performed)
        self._counts[task_id] = count
        if seq is None:  # an INSERT always sets it; sqlite3 types it Optional for statements that insert nothing
            raise sqlite3.DatabaseError("the ledger's INSERT reported no row id")
        return ActionResult(seq=seq, performed=performed, result=result, reply=reply, performed_count=count)

    @staticmethod
    def _count_in_file(conn: sqlite3.Connection, task_id: str) -> int:
        (count,) = conn.execute(
            "SELECT COUNT(*) FROM actions WHERE task_id = ? AND performed = 1", (task_id,)
        ).fetchone()
        return count

    def no_fsync(self) -> None:
        """Commit into the OS only (``synchronous=OFF``): for the run's service, on its own connection.

        Why this is enough: what a committed action must survive is a SIGKILL of the service or of
        a worker, and what was written to the OS does (the run's history is never fsynced either;
        a power loss is not a fault takeover injects). Why it matters: with ``NORMAL`` a checkpoint
        syncs, so it was kept off the reply path on a background thread; but a passive checkpoint
        running beside continuous commits never caught up with them, so the WAL never started
        over: it grew by every page of every commit (hundreds of MB in a few seconds of a bench)
        and each commit paid for new file blocks. Without syncs SQLite's own checkpoint, run by the
        committing connection every ~1000 pages, is cheap (pages copied within the page cache) and
        completes, so the WAL starts over. Measured with 4 workers: about 10 us less service CPU
        per action.
        """
        self._conn.execute("PRAGMA synchronous=OFF")

    def performed_count(self, task_id: str) -> int:
        return self._count_in_file(self._conn, task_id)

    def lookup(self, key: str) -> bool:
        """Did an action with this idempotency key happen? (reconciliation of ``uncertain``)."""
        return self._conn.execute(_PERFORMED_KEY, (key,)).fetchone() is not None

    def close(self) -> None:
        self._conn.close()
