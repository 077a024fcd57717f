"""litequeue 0.9 (PyPI, MIT, one file on SQLite) behind the queue contract.

Name: ``takeover.adapters.litequeue:LiteQueueAdapter``. Install: ``pip install 'takeover[litequeue]'``.

What litequeue 0.9 offers, read from its source (``litequeue.py``):

* ``put(data)`` inserts a ``READY`` message with a uuid7 ``message_id``.
* ``pop()`` locks the oldest ``READY`` message in one ``BEGIN IMMEDIATE`` transaction
  (``UPDATE ... RETURNING``): ``status = LOCKED``, ``lock_time = time_ns()``.
* There is no lease length and no expiry inside ``pop``. The visibility timeout is the caller's
  job: ``list_locked(threshold_seconds)`` lists messages with ``lock_time < time_ns() - threshold``
  and ``retry(message_id)`` sets one back to ``READY``. This adapter runs that documented recipe at
  the start of every ``claim``, with the contract's ``lease`` as the threshold.
* ``done(message_id)`` / ``mark_failed(message_id)`` set ``DONE`` / ``FAILED`` by message id alone:
  no lock token, no check that the caller still holds the lock, no check of the time.
* ``retry`` sets ``READY`` by message id alone too, whatever the current status.

How the contract maps onto it, and what is *not* added:

* task id = the message's ``data`` (the payload is the task name); the message id stays internal.
* states: ``READY`` -> pending, ``LOCKED`` -> running, ``DONE`` -> done, ``FAILED`` -> uncertain.
* generation: litequeue has none. A trigger in the same SQLite file counts transitions to
  ``LOCKED`` (it fires inside litequeue's own ``pop`` transaction, so the count is exact and
  atomic with the lock) and records ``(message_id, lock_time) -> generation``. The generation is
  therefore "the n-th time litequeue handed this message out": a faithful observation, not a
  token the library checks. ``finish`` ignores the generation, because ``done`` does.
* ``finish`` returns whether litequeue's ``done`` / ``mark_failed`` changed a row: that is
  everything the library tells its caller. A late or stale holder's completion is accepted
  whenever litequeue accepts it; the checker then reports what that does.
* lease_until = ``lock_time + lease``: when the sweep in the next ``claim`` may release the lock.

The clock: litequeue reads ``time.time_ns`` itself, through its module attribute
``litequeue.time_ns``. Every call whose semantics depend on time (``pop``, ``list_locked``,
``done``, ``mark_failed``) runs with that attribute replaced by the harness's ``now``, so the
library sees exactly the clock the history records: logical seconds in the scenarios,
``time.time()`` in stress runs (where this changes nothing but the few microseconds between the
worker reading the clock and the library reading it). ``put`` keeps the real clock: there it only
feeds ``in_time`` and the uuid7 message id (``uuid7`` turns ``time_ns() == 0`` into an all-zero
id, so registering two tasks at logical t=0 would collide). The swap is per process and not
thread-safe; the harness uses one queue object per process, from one thread.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from takeover.contract import OUTCOMES, Claim, SnapshotRow
from takeover.errors import ContractError

try:
    import litequeue as _lq
except ImportError:  # pragma: no cover - exercised only without the extra
    raise ContractError(
        "takeover.adapters.litequeue needs the litequeue library: pip install 'takeover[litequeue]'"
    ) from None

SUPPORTED_VERSION = "0.9"
if getattr(_lq, "__version__", None) != SUPPORTED_VERSION:
    # The clock hook (module attribute time_ns), the table layout and the status numbers were
    # read from 0.9; another version may differ, so say so instead of testing something else.
    raise ContractError(
        f"takeover.adapters.litequeue was written for litequeue {SUPPORTED_VERSION}, "
        f"found {getattr(_lq, '__version__', 'unknown')}: pip install 'takeover[litequeue]'"
    )

TABLE = "Queue"  # litequeue's default queue_name
STATE_NAMES = {
    int(_lq.MessageStatus.READY): "pending",
    int(_lq.MessageStatus.LOCKED): "running",
    int(_lq.MessageStatus.DONE): "done",
    int(_lq.MessageStatus.FAILED): "uncertain",
}
_LOCKED = int(_lq.MessageStatus.LOCKED)

# Additive schema owned by the adapter: an index so task ids resolve to message ids without a
# scan, the lock counter (fed by a trigger inside litequeue's own pop transaction), and the lease
# the sweep uses, so snapshot() can report lease_until in a process that never claimed.
ADAPTER_SCHEMA = f"""
CREATE INDEX IF NOT EXISTS takeover_by_data ON [{TABLE}] (data);
CREATE TABLE IF NOT EXISTS takeover_locks (
    message_id TEXT NOT NULL,
    generation INTEGER NOT NULL,
    lock_time  INTEGER,
    PRIMARY KEY (message_id, generation)
);
CREATE TRIGGER IF NOT EXISTS takeover_count_locks AFTER UPDATE OF status ON [{TABLE}]
WHEN NEW.status = {_LOCKED} AND OLD.status <> {_LOCKED}
BEGIN
    INSERT INTO takeover_locks (message_id, generation, lock_time)
    VALUES (NEW.message_id,
            1 + (SELECT COUNT(*) FROM takeover_locks WHERE message_id = NEW.message_id),
            NEW.lock_time);
END;
CREATE TABLE IF NOT EXISTS takeover_meta (key TEXT PRIMARY KEY, value REAL NOT NULL);
"""

BUSY_TIMEOUT_S = 30.0  # litequeue's default is sqlite3's 5 s; 16 workers on 2 cores wait longer
OPEN_DEADLINE_S = 30.0


def _ns(now: float) -> int:
    return round(now * 1_000_000_000)


@contextmanager
def _library_clock(now: float) -> Iterator[None]:
    """Make litequeue read ``now`` wherever it would read ``time.time_ns()``."""
    ns = _ns(now)
    saved: Callable[[], int] = _lq.time_ns
    _lq.time_ns = lambda: ns
    try:
        yield
    finally:
        _lq.time_ns = saved


def _retry_locked(fn: Callable[[], Any]) -> Any:
    """Opening races (WAL switch, DDL) raise "locked" at once; retry them for a bounded time."""
    deadline = time.monotonic() + OPEN_DEADLINE_S
    delay = 0.005
    while True:
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.1)


class LiteQueueAdapter:
    """``takeover.adapters.litequeue:LiteQueueAdapter`` — litequeue 0.9 as it is, behind the contract."""

    # What each contract call is in litequeue's API, for `takeover replay --issue` (takeover._internal.replay.issue).
    library = "litequeue"
    library_calls = {
        "register": "`LiteQueue.put(data)`",
        "claim": "`list_locked({lease})`, `retry(message_id)` for each listed, then `pop()`",
        "finish:done": "`done(message_id)`",
        "finish:uncertain": "`mark_failed(message_id)`",
    }
    library_states = {"pending": "READY", "running": "LOCKED", "done": "DONE", "uncertain": "FAILED"}

    def __init__(self, db_path: str) -> None:
        self.db_path = db_path
        self._q = _retry_locked(lambda: _lq.LiteQueue(db_path, queue_name=TABLE, timeout=BUSY_TIMEOUT_S))
        self._conn: sqlite3.Connection = self._q.conn
        _retry_locked(self._install_schema)
        self._lease: float | None = None

    def _install_schema(self) -> None:
        with self._q.transaction(mode="IMMEDIATE"):
            for statement in _split_sql(ADAPTER_SCHEMA):
                self._conn.execute(statement)

    # -- the contract ------------------------------------------------------------------------

    def register(self, task_id: str, now: float) -> None:
        self.register_many([task_id], now)

    def register_many(self, task_ids: list[str], now: float) -> None:
        """Optional extension: one transaction for a batch. Registering twice changes nothing,
        which litequeue's ``put`` does not promise, so the adapter checks first."""
        with self._q.transaction(mode="IMMEDIATE"):
            for task_id in task_ids:
                if self._message_id(task_id) is None:
                    self._q.put(task_id)

    def claim(self, worker: str, now: float, lease: float) -> Claim | None:
        self._remember_lease(lease)
        with _library_clock(now):
            # litequeue's visibility timeout, exactly as its API offers it: list the messages
            # locked longer than the threshold, put each back to READY, then pop.
            for message in list(self._q.list_locked(lease)):
                self._q.retry(message.message_id)
            message = self._q.pop()
        if message is None:
            return None
        row = self._conn.execute(
            "SELECT generation FROM takeover_locks WHERE message_id = ? AND lock_time = ? "
            "ORDER BY generation DESC LIMIT 1",
            (message.message_id, message.lock_time),
        ).fetchone()
        if row is None:  # the trigger runs in pop's transaction; missing means the schema is gone
            raise RuntimeError(f"no lock record for message {message.message_id}")
        return message.data, int(row[0]), message.lock_time / 1e9 + lease

    def finish(self, task_id: str, generation: int, outcome: str, now: float) -> bool:
        """``generation`` is not passed on: litequeue's ``done`` takes a message id only."""
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, got {outcome!r}")
        message_id = self._message_id(task_id)
        if message_id is None:
            return False
        with _library_clock(now):
            if outcome == "done":
                self._q.done(message_id)
            else:
                self._q.mark_failed(message_id)
        # Rows changed by that UPDATE on this connection (triggers excluded): litequeue's answer.
        return self._conn.execute("SELECT changes()").fetchone()[0] == 1

    def snapshot(self) -> list[SnapshotRow]:
        lease = self._stored_lease()
        rows = self._conn.execute(
            f"SELECT q.data, q.status, q.lock_time, "
            f"(SELECT COALESCE(MAX(generation), 0) FROM takeover_locks l WHERE l.message_id = q.message_id) "
            f"FROM [{TABLE}] q ORDER BY q.rowid"
        ).fetchall()
        out: list[SnapshotRow] = []
        for data, status, lock_time, generation in rows:
            state = STATE_NAMES.get(int(status), f"unknown({status})")
            lease_until = None
            if state == "running" and lock_time is not None and lease is not None:
                lease_until = lock_time / 1e9 + lease
            out.append((data, state, int(generation), lease_until))
        return out

    def close(self) -> None:
        self._q.close()

    # -- helpers -----------------------------------------------------------------------------

    def _message_id(self, task_id: str) -> str | None:
        row = self._conn.execute(
            f"SELECT message_id FROM [{TABLE}] WHERE data = ? ORDER BY rowid LIMIT 1", (task_id,)
        ).fetchone()
        return None if row is None else row[0]

    def _remember_lease(self, lease: float) -> None:
        if lease == self._lease:
            return
        self._conn.execute(
            "INSERT INTO takeover_meta (key, value) VALUES ('lease', ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (lease,),
        )
        self._lease = lease

    def _stored_lease(self) -> float | None:
        if self._lease is not None:
            return self._lease
        row = self._conn.execute("SELECT value FROM takeover_meta WHERE key = 'lease'").fetchone()
        return None if row is None else float(row[0])


def _split_sql(script: str) -> list[str]:
    """Statements of ADAPTER_SCHEMA; a trigger body keeps its inner semicolons."""
    statements: list[str] = []
    buffer = ""
    for line in script.strip().splitlines():
        buffer += line + "\n"
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    return statements
