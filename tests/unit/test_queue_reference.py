"""The reference queue's promises that the scenarios do not reach: many tasks, reopen, scale, and
the optional extend (heartbeats) and resolve (reconciliation).

Why query plans and VM instruction counts instead of timings: "claims do not slow down as done
rows pile up" is a property of the plan. A plan that searches the (state, lease_until) index
costs the same number of SQLite VM instructions with 10 or 20,000 finished rows; a scan or a
temporary B-tree for sorting grows with them. Both are exact, so the test cannot be flaky.
"""

from __future__ import annotations

import sqlite3

import pytest

from takeover.contract import REFERENCE_QUEUE, check_queue_object
from takeover.queues import sqlite_lease
from takeover.queues.sqlite_lease import SQLiteLeaseQueue
from tests.helpers.reference_promises import (
    BAD_ARGUMENTS,
    assert_claim_order,
    assert_refused_unchanged,
    assert_return_types,
)

LEASE = 30.0


@pytest.fixture
def db(tmp_path):
    return str(tmp_path / "queue.sqlite")


@pytest.fixture
def queue(db):
    q = SQLiteLeaseQueue(db)
    yield q
    q.close()


def test_satisfies_the_contract(queue):
    check_queue_object(queue, REFERENCE_QUEUE)


def test_file_is_in_wal_mode(queue, db):
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()


def test_close_and_reopen_keeps_every_committed_change(db):
    q = SQLiteLeaseQueue(db)
    for i in range(5):
        q.register(f"t{i}", 0)
    claims = [q.claim("A", 1, LEASE) for _ in range(3)]
    assert q.finish(claims[0][0], claims[0][1], "done", 2) is True
    assert q.finish(claims[1][0], claims[1][1], "uncertain", 2) is True
    before = q.snapshot()
    q.close()

    q = SQLiteLeaseQueue(db)
    try:
        assert q.snapshot() == before
        # the surviving lease still fences: not claimable before expiry, claimable at it
        t2 = claims[2][0]
        got = [q.claim("B", 30, LEASE), q.claim("B", 30, LEASE)]
        assert {g[0] for g in got} == {"t3", "t4"}
        assert q.claim("B", 30.5, LEASE) is None
        assert q.claim("B", 31, LEASE) == (t2, 2, 61.0)
        assert q.finish(t2, 1, "done", 32) is False  # the pre-reopen generation is stale now
    finally:
        q.close()


def test_register_is_idempotent(queue):
    queue.register("a", 0)
    claimed = queue.claim("A", 1, LEASE)
    queue.register("a", 5)  # a duplicate arrival must not reset the running task
    assert queue.snapshot() == [("a", "running", 1, 31.0)]
    assert claimed == ("a", 1, 31.0)


def test_claim_order_expired_first_then_pending_in_registration_order(queue):
    assert_claim_order(queue)


def test_return_types_match_the_contract(queue):
    assert_return_types(queue)


@pytest.mark.parametrize(("call", "message"), BAD_ARGUMENTS)
def test_bad_arguments_raise_and_change_nothing(queue, call, message):
    """SQLite stores NaN as NULL: unchecked, a NaN time would strand a task forever."""
    assert_refused_unchanged(queue, call, message)


# ------------------------------------------------------------------------------ scale with done rows

CLAIM_QUERIES = {
    "pick_expired": (sqlite_lease._PICK_EXPIRED, (100.0,)),
    "pick_pending": (sqlite_lease._PICK_PENDING, ()),
    "take": (sqlite_lease._TAKE, (130.0, "w", "t1")),
    "finish": (sqlite_lease._FINISH, ("done", "t1", 1, 100.0)),
}


def _plan(conn, sql, args):
    return [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, args)]


def _fill(db, done, pending=5, running=5):
    q = SQLiteLeaseQueue(db)
    q.register_many([f"t{i}" for i in range(done + pending + running)], 0)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("UPDATE tasks SET state = 'done', generation = 1 WHERE rowid <= ?", (done,))
    conn.execute(
        "UPDATE tasks SET state = 'running', generation = 1, lease_until = 50 WHERE rowid > ? AND rowid <= ?",
        (done, done + running),
    )
    return q, conn


@pytest.mark.parametrize("analyze", [False, True], ids=["fresh", "after-ANALYZE"])
def test_every_claim_and_finish_query_searches_an_index(db, analyze):
    q, conn = _fill(db, done=5000)
    try:
        if analyze:
            # statistics taken while the table was all pending once made the planner scan
            conn.execute("ANALYZE")
        for name, (sql, args) in CLAIM_QUERIES.items():
            plan = _plan(conn, sql, args)
            text = " | ".join(plan)
            assert all(step.startswith("SEARCH tasks USING ") for step in plan), f"{name}: {text}"
            assert "TEMP B-TREE" not in text, f"{name} sorts: {text}"
        assert "tasks_by_state" in " ".join(_plan(conn, *CLAIM_QUERIES["pick_expired"]))
        assert "tasks_by_state" in " ".join(_plan(conn, *CLAIM_QUERIES["pick_pending"]))
    finally:
        conn.close()
        q.close()


def _vm_steps_per_claim(db, done):
    """SQLite VM instructions for one claim and one finish: exact work, unlike wall time."""
    q, conn = _fill(db, done=done, pending=3, running=1)
    conn.close()
    counter = [0]

    def tick():
        counter[0] += 1
        return 0

    q._conn.set_progress_handler(tick, 1)
    try:
        # the one expired running task (the expiry path), then a pending one (the pending path)
        task_id, gen, _ = q.claim("w", 100.0, LEASE)
        assert gen == 2
        assert q.finish(task_id, gen, "done", 101.0) is True
        task_id, gen, _ = q.claim("w", 101.0, LEASE)
        assert gen == 1
        assert q.finish(task_id, gen, "done", 102.0) is True
        return counter[0]
    finally:
        q._conn.set_progress_handler(None, 1)
        q.close()


def test_claim_work_does_not_grow_with_done_rows(tmp_path):
    small = _vm_steps_per_claim(str(tmp_path / "small.sqlite"), done=10)
    large = _vm_steps_per_claim(str(tmp_path / "large.sqlite"), done=20_000)
    # A scan would cost ~20,000x more; allow slack for B-tree depth (one more level).
    assert large <= small * 1.5 + 50, (small, large)


# The optional methods: extend (heartbeats) and resolve (reconciliation).


def test_extend_is_fenced_by_generation_and_by_the_lease(tmp_path):
    q = SQLiteLeaseQueue(str(tmp_path / "q.sqlite"))
    q.register("a", 0.0)
    _, gen, until = q.claim("w", 1.0, 1.0)
    assert q.extend("a", gen, 1.5, 1.0) == 2.5
    assert q.extend("a", gen, 1.6, 0.1) == 2.5  # never shortens a lease
    assert q.extend("a", gen + 1, 1.7, 1.0) is None  # not the holder's generation
    assert q.extend("a", gen, 2.5, 1.0) is None  # now >= lease_until: the lease is lost
    _, gen2, _ = q.claim("w2", 2.6, 1.0)
    assert gen2 == gen + 1 and q.extend("a", gen, 2.7, 1.0) is None
    assert q.finish("a", gen2, "done", 2.8) and q.extend("a", gen2, 2.9, 1.0) is None
    q.close()


def test_resolve_only_moves_an_uncertain_task_of_that_generation(tmp_path):
    q = SQLiteLeaseQueue(str(tmp_path / "q.sqlite"))
    q.register("a", 0.0)
    _, gen, _ = q.claim("w", 1.0, 1.0)
    assert not q.resolve("a", gen, "done", 1.1)  # running, not uncertain
    assert q.finish("a", gen, "uncertain", 1.2)
    assert not q.resolve("a", gen + 1, "pending", 1.3)  # wrong generation
    assert q.resolve("a", gen, "pending", 1.4)
    assert not q.resolve("a", gen, "done", 1.5)  # already resolved
    assert q.claim("w", 1.6, 1.0)[1] == gen + 1
    with pytest.raises(ValueError):
        q.resolve("a", gen, "running", 1.7)
    q.close()
