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
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in (s.strip() for s in schema.split(";")):
                if statement:
                    conn.execute(statement)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    _retry_locked(set_wal, deadline)
    conn.execute(f"PRAGMA synchronous={synchronous}")
    _retry_locked(create, deadline)
    return conn
