"""What the PostgreSQL adapters share: the run's database URL, the database clock, a private event
loop, and a set-up that runs once per database however many processes open it at the same time.

The clock. The published PostgreSQL queues read time from the server, as ``NOW()`` inside their
SQL: a claim's ``started`` event, a worker's heartbeat, a stale-heartbeat threshold. The contract
passes ``now`` instead (logical seconds in the scenarios, ``time.time()`` in stress runs), and an
adapter must make the library see that clock, as the litequeue adapter does by replacing
``litequeue.time_ns``. Here the same is done in the database: a function ``takeover_clock.now()``
returns the session setting ``takeover.now`` (the harness's ``now``, set before each library call
on the connection the library uses), or the server's own ``pg_catalog.now()`` when unset. Each
connection the adapters open puts that schema before ``pg_catalog`` on its ``search_path``, so
every unqualified ``NOW()`` in the library's statements and PL/pgSQL functions resolves to it, and
so do the ``DEFAULT NOW()`` column defaults the library creates through such a connection. Nothing
else in the library's SQL changes. ``CURRENT_TIMESTAMP`` cannot be redirected this way; none of the
three libraries uses it in the statements the adapters run.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from takeover.adapters.pins import require_library  # noqa: F401 - the PostgreSQL adapters call pg.require_library
from takeover.contract import SnapshotRow
from takeover.errors import ContractError

try:
    import psycopg
except ImportError:  # pragma: no cover - exercised only without the extras
    raise ContractError(
        "the PostgreSQL adapters need psycopg: pip install 'takeover[procrastinate]' (or pgqueuer, chancy)"
    ) from None

T = TypeVar("T")

URL_PREFIXES = ("postgresql://", "postgres://")
CLOCK_SCHEMA = "takeover_clock"
# public first, so the library's tables are created where it expects them; the clock before pg_catalog.
SEARCH_PATH = f"public,{CLOCK_SCHEMA},pg_catalog"
CONNECT_OPTIONS = f"-c search_path={SEARCH_PATH}"

SETUP_DDL = f"""
CREATE SCHEMA IF NOT EXISTS {CLOCK_SCHEMA};
CREATE OR REPLACE FUNCTION {CLOCK_SCHEMA}.now() RETURNS timestamptz LANGUAGE sql STABLE AS $$
    SELECT COALESCE(pg_catalog.to_timestamp(NULLIF(pg_catalog.current_setting('takeover.now', true), '')::float8),
                    pg_catalog.now())
$$;
CREATE TABLE IF NOT EXISTS takeover_meta (key text PRIMARY KEY, value double precision NOT NULL);
"""

SET_CLOCK = "SELECT pg_catalog.set_config('takeover.now', %(now)s, false)"


def require_url(db: str, name: str) -> str:
    """The adapters run on PostgreSQL only: a SQLite path is bad input, named in one line."""
    if not isinstance(db, str) or not db.startswith(URL_PREFIXES):
        raise ContractError(
            f"{name} runs on PostgreSQL only: run it with --db postgres or --db postgresql://..., got {db!r}"
        )
    return db


def clock_value(now: float) -> str:
    """``repr`` keeps every digit of the float, so the database sees exactly the history's ``now``."""
    return repr(float(now))


def connect(url: str) -> psycopg.Connection[Any]:
    """The adapter's own connection (set-up, lookups, snapshot), autocommit, clock on its path."""
    return psycopg.connect(url, autocommit=True, options=CONNECT_OPTIONS)


class EventLoop:
    """The three libraries are asyncio code; the contract's calls are plain calls from one thread.
    Each adapter owns one loop and runs each library call to completion on it: nothing of the
    library runs between two calls, as nothing runs in a litequeue adapter between two calls."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()

    def run(self, work: Awaitable[T]) -> T:
        return self._loop.run_until_complete(work)

    def close(self) -> None:
        if not self._loop.is_closed():
            self._loop.close()


@contextmanager
def setup_lock(url: str, library: str) -> Iterator[tuple[psycopg.Connection[Any], bool]]:
    """Serialise set-up: the coordinator and every worker open the queue, often at the same moment,
    and the library's schema must be created once. Yields the connection and whether the set-up
    was already done; the lock is the session's and goes with the connection."""
    conn = connect(url)
    try:
        conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (f"takeover.setup.{library}",))
        conn.execute(SETUP_DDL)
        row = conn.execute("SELECT 1 FROM takeover_meta WHERE key = %s", (f"installed.{library}",)).fetchone()
        yield conn, row is not None
    finally:
        conn.close()


def mark_installed(conn: psycopg.Connection[Any], library: str) -> None:
    conn.execute(
        "INSERT INTO takeover_meta (key, value) VALUES (%s, 1) ON CONFLICT (key) DO NOTHING", (f"installed.{library}",)
    )


class StoredLease:
    """The contract's lease length, kept in the database so that ``snapshot()`` can report
    ``lease_until`` from a process that never claimed (the coordinator)."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn
        self._lease: float | None = None

    def remember(self, lease: float) -> None:
        if lease == self._lease:
            return
        self._conn.execute(
            "INSERT INTO takeover_meta (key, value) VALUES ('lease', %s) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (lease,),
        )
        self._lease = lease

    def get(self) -> float | None:
        if self._lease is not None:
            return self._lease
        row = self._conn.execute("SELECT value FROM takeover_meta WHERE key = 'lease'").fetchone()
        return None if row is None else float(row[0])


def snapshot_row(task: str, state: str, generation: int, seen: Any, lease: float | None) -> SnapshotRow:
    """A running task's lease runs until its holder's last sign of life (a timestamptz: the claim or
    the latest heartbeat) plus the lease: from then on the library's recovery may take it back."""
    lease_until = None
    if state == "running" and seen is not None and lease is not None:
        lease_until = float(seen.timestamp()) + lease
    return task, state, int(generation), lease_until


def shut(loop: EventLoop, closing: Awaitable[Any], conn: psycopg.Connection[Any]) -> None:
    """``close()``: the library's connections (``closing``), the loop, the adapter's connection."""
    try:
        loop.run(closing)
    finally:
        loop.close()
        conn.close()


def utc_datetime(now: float) -> datetime.datetime:
    """The harness's ``now`` where a library takes Python time (``datetime.now(UTC)``)."""
    return datetime.datetime.fromtimestamp(now, tz=datetime.UTC)
