"""litequeue 0.9 behind the contract: what the adapter maps faithfully, and what the library does.

These tests pin down the library's behaviour as the adapter exposes it (real SQLite files, in this
process; tests/system/test_adapter_litequeue.py has the ones with real processes), including the
promises litequeue does not keep: they are findings, asserted so that a change in the library or
the adapter shows up here rather than silently in a stress report.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

litequeue = pytest.importorskip("litequeue", reason="litequeue is an optional extra: pip install '.[litequeue]'")

from takeover.contract import check_queue_object, open_queue, validate_claim_result, validate_snapshot  # noqa: E402

SPEC = "takeover.adapters.litequeue:LiteQueueAdapter"
LEASE = 30.0


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "queue.sqlite")


def reopen(queue, db: str):
    queue.close()
    return open_queue(SPEC, db)


def test_adapter_meets_the_contract_shape(db: str) -> None:
    q = open_queue(SPEC, db)
    check_queue_object(q, SPEC)
    q.register("t1", 0.0)
    got = validate_claim_result(q.claim("A", 1.0, LEASE), SPEC)
    assert got == ("t1", 1, 31.0)
    assert validate_snapshot(q.snapshot(), SPEC) == [("t1", "running", 1, 31.0)]
    q.close()


def test_register_is_idempotent_and_survives_reopen(db: str) -> None:
    q = open_queue(SPEC, db)
    q.register("t1", 0.0)
    q.register("t1", 0.0)
    q.register_many(["t1", "t2", "t3"], 0.0)
    q = reopen(q, db)
    assert [row[0] for row in q.snapshot()] == ["t1", "t2", "t3"]
    assert {row[1:] for row in q.snapshot()} == {("pending", 0, None)}
    q.close()


def test_library_reads_the_harness_clock_and_gets_its_own_back(db: str) -> None:
    """pop() stores lock_time from time_ns(); under the adapter that is the harness's now."""
    q = open_queue(SPEC, db)
    q.register("t1", 0.0)
    q.claim("A", 1234.5, LEASE)
    lock_time = sqlite3.connect(db).execute("SELECT lock_time FROM Queue").fetchone()[0]
    assert lock_time == 1234_500_000_000
    assert litequeue.time_ns is __import__("time").time_ns  # restored after the call
    q.close()


def test_generation_counts_locks_across_processes_and_reopens(db: str) -> None:
    q = open_queue(SPEC, db)
    q.register("t1", 0.0)
    assert q.claim("A", 1.0, LEASE)[1] == 1
    q = reopen(q, db)
    assert q.claim("B", 100.0, LEASE)[1] == 2  # the sweep released A's lock
    q = reopen(q, db)
    assert q.claim("C", 200.0, LEASE)[1] == 3
    assert q.snapshot() == [("t1", "running", 3, 230.0)]
    q.close()


def test_expiry_is_strict_one_tick_later_than_the_contract(db: str) -> None:
    """Finding: list_locked() uses lock_time < now - threshold, so at now == lease_until the
    lease is still held; the contract (and spec S2 step 5) makes it claimable there."""
    q = open_queue(SPEC, db)
    q.register("t1", 0.0)
    assert q.claim("A", 1.0, LEASE) == ("t1", 1, 31.0)
    assert q.claim("B", 30.0, LEASE) is None
    assert q.claim("B", 31.0, LEASE) is None  # the contract says ("t1", 2, 61.0)
    claim = q.claim("B", 31.001, LEASE)
    assert claim is not None and claim[:2] == ("t1", 2)
    q.close()


def test_completion_is_not_fenced(db: str) -> None:
    """Finding: done() takes a message id only. A stale holder's finish is accepted after a
    takeover, and a finish after the lease ran out is accepted too."""
    q = open_queue(SPEC, db)
    q.register("t1", 0.0)
    q.claim("A", 1.0, LEASE)
    assert q.claim("B", 40.0, LEASE)[1] == 2
    assert q.finish("t1", 1, "done", 41.0) is True  # generation 1 is stale: the contract says False
    assert q.snapshot() == [("t1", "done", 2, None)]
    assert q.finish("t1", 2, "done", 42.0) is True  # a second finish takes effect as well
    q.register("t2", 0.0)
    q.claim("A", 50.0, LEASE)
    assert q.finish("t2", 1, "uncertain", 500.0) is True  # long past lease_until = 80
    assert q.snapshot()[1] == ("t2", "uncertain", 1, None)
    q.close()


def test_done_and_failed_are_never_claimed_again(db: str) -> None:
    q = open_queue(SPEC, db)
    q.register_many(["t1", "t2"], 0.0)
    q.claim("A", 1.0, LEASE)
    q.claim("A", 1.0, LEASE)
    assert q.finish("t1", 1, "done", 2.0) and q.finish("t2", 1, "uncertain", 2.0)
    q = reopen(q, db)
    assert q.claim("B", 10_000.0, LEASE) is None
    assert [row[1] for row in q.snapshot()] == ["done", "uncertain"]
    q.close()


def test_finish_of_an_unknown_task_is_rejected(db: str) -> None:
    q = open_queue(SPEC, db)
    assert q.finish("nope", 1, "done", 1.0) is False
    with pytest.raises(ValueError):
        q.finish("nope", 1, "failed", 1.0)
    q.close()
