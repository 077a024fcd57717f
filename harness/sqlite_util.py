"""Opening SQLite files that many processes create and use at once.

Why this exists: the first process to open a new file switches it to WAL and creates the schema.
When several processes do that at the same instant, ``PRAGMA journal_mode=WAL`` and DDL can fail
with "database is locked" at once, without waiting for the busy timeout. So set-up runs under a
write lock taken up front (``BEGIN IMMEDIATE``) and retries for a bounded time.
"""

from __future__ import annotations

import sqlite3
import time

BUSY_TIMEOUT_MS = 10_000
SETUP_DEADLINE_S = 30.0


def connect(path: str, *, synchronous: str = "NORMAL") -> sqlite3.Connection:
    """A connection in autocommit mode: every transaction is an explicit BEGIN ... COMMIT."""
    conn = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    return conn


class write_transaction:  # noqa: N801 - used like a function: ``with write_transaction(conn) as conn``
    """One transaction that takes the write lock up front; committed on success, rolled back otherwise.

    ``BEGIN IMMEDIATE`` rather than a deferred BEGIN: a deferred transaction that reads and then
    writes fails at once with "database is locked" under contention, without waiting for the busy
    timeout, and two processes could both read the same claimable row. A class rather than
    ``@contextmanager``: this wraps every claim and finish, and a generator costs three times more.
    """

    __slots__ = ("conn",)

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, exc_type, exc, tb) -> None:
        conn = self.conn
        if exc_type is None:
            try:
                conn.execute("COMMIT")
                return
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        if conn.in_transaction:
            conn.execute("ROLLBACK")


def _retry_locked(fn, deadline: float) -> None:
    delay = 0.001
    while True:
        try:
            fn()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            if time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.05)


def open_wal(path: str, schema: str, *, synchronous: str = "NORMAL") -> sqlite3.Connection:
    """Open ``path`` in WAL mode with ``schema`` (idempotent DDL) applied, safely under concurrency."""
    conn = connect(path)
    deadline = time.monotonic() + SETUP_DEADLINE_S

    def set_wal() -> None:
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        if mode.lower() != "wal":
            got = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if got.lower() == "memory":
                raise ValueError(f"{path!r} is an in-memory database; takeover needs a file shared by processes")
            if got.lower() != "wal":
                raise sqlite3.OperationalError(f"database is locked (journal_mode stayed {got})")

    def create() -> None:
        with write_transaction(conn):
            for statement in (s.strip() for s in schema.split(";")):
                if statement:
                    conn.execute(statement)

    _retry_locked(set_wal, deadline)
    conn.execute(f"PRAGMA synchronous={synchronous}")
    _retry_locked(create, deadline)
    return conn
