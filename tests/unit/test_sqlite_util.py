"""The shared SQLite plumbing: write transactions and WAL set-up."""

from __future__ import annotations

import sqlite3

import pytest

from takeover._internal.sqlite_util import open_wal, write_transaction

SCHEMA = "CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY, v INTEGER)"


def test_write_transaction_commits_on_success_and_rolls_back_on_error(tmp_path) -> None:
    conn = open_wal(str(tmp_path / "x.sqlite"), SCHEMA)
    with write_transaction(conn) as c:
        c.execute("INSERT INTO t VALUES ('a', 1)")
    with pytest.raises(RuntimeError), write_transaction(conn) as c:
        c.execute("INSERT INTO t VALUES ('b', 2)")
        raise RuntimeError("boom")
    assert not conn.in_transaction
    # A second connection sees exactly what was committed.
    other = sqlite3.connect(str(tmp_path / "x.sqlite"))
    assert other.execute("SELECT k FROM t ORDER BY k").fetchall() == [("a",)]


def test_write_transaction_takes_the_write_lock_up_front(tmp_path) -> None:
    path = str(tmp_path / "x.sqlite")
    first = open_wal(path, SCHEMA)
    second = open_wal(path, SCHEMA)
    second.execute("PRAGMA busy_timeout=0")
    with write_transaction(first):
        # Before anything is written, another writer is already shut out: no read-then-write race.
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            second.execute("BEGIN IMMEDIATE")
    with write_transaction(second) as c:
        c.execute("INSERT INTO t VALUES ('c', 3)")


def test_a_constraint_error_inside_leaves_no_open_transaction(tmp_path) -> None:
    conn = open_wal(str(tmp_path / "x.sqlite"), SCHEMA)
    with write_transaction(conn) as c:
        c.execute("INSERT INTO t VALUES ('a', 1)")
    with pytest.raises(sqlite3.IntegrityError), write_transaction(conn) as c:
        c.execute("INSERT INTO t VALUES ('z', 9)")
        c.execute("INSERT INTO t VALUES ('a', 1)")
    assert not conn.in_transaction
    assert conn.execute("SELECT COUNT(*) FROM t").fetchone() == (1,)


def test_an_in_memory_database_is_refused_at_once() -> None:
    with pytest.raises(ValueError, match="in-memory"):
        open_wal(":memory:", SCHEMA)


def test_a_spinning_writer_waits_for_the_lock_and_gives_up_at_the_busy_timeout(tmp_path, monkeypatch) -> None:
    import threading
    import time

    import takeover._internal.sqlite_util as su

    path = str(tmp_path / "x.sqlite")
    holder = open_wal(path, SCHEMA)
    waiter = open_wal(path, SCHEMA, spin_for_lock=True)
    holder.execute("BEGIN IMMEDIATE")
    threading.Timer(0.15, lambda: holder.execute("COMMIT")).start()
    start = time.monotonic()
    with write_transaction(waiter) as c:  # blocked until the holder commits, then proceeds
        c.execute("INSERT INTO t VALUES ('w', 1)")
    assert time.monotonic() - start >= 0.1
    monkeypatch.setattr(su, "BUSY_TIMEOUT_MS", 200)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(sqlite3.OperationalError, match="locked"), write_transaction(waiter):
            pass
    finally:
        holder.execute("ROLLBACK")
    assert not waiter.in_transaction
