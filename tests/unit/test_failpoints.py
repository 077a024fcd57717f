"""The statement hook (takeover._internal.failpoints) on real SQLite connections opened by a user's queue.

What must hold: the hook sees the statements of the call under way in order and learns how many a
call issues; a trap springs before exactly the statement it was armed for, with that statement not
run yet; a statement under SQLite's write lock is offered as ``locked``, and a call that ends with its
trap passed over says so; once each call has been learned and nothing is armed, the connections have
no callback at all (the no-overhead path); and ``connect`` is given back as it was.
"""

from __future__ import annotations

import importlib
import sqlite3
from pathlib import Path

import pytest

from takeover._internal.failpoints import LEARN, Point, StatementHook
from tests.helpers.processes import REPO


@pytest.fixture
def mistakes(monkeypatch: pytest.MonkeyPatch):
    """tests/fixtures/queues/user_mistakes.py: a user's queue, on its own connections."""
    monkeypatch.syspath_prepend(str(REPO / "tests" / "fixtures" / "queues"))
    return importlib.import_module("user_mistakes")


def opened(hook: StatementHook, cls: type, path: Path):
    with hook.watching():
        return cls(str(path))


def test_a_trap_stops_a_check_then_act_finish_between_its_select_and_its_update(tmp_path: Path, mistakes) -> None:
    hook = StatementHook()
    queue = opened(hook, mistakes.CheckThenActFinish, tmp_path / "q.db")
    other = mistakes.UserQueue(str(tmp_path / "q.db"))  # another process's view: no hook
    queue.register("t1", 0.0)
    with hook.call("claim"):
        task, gen, _ = queue.claim("w1", 1.0, 10.0)
    with hook.call("finish"):
        pass  # a call that issued nothing: the count stays unknown
    assert "finish" not in hook.counts
    assert hook.counts["claim"] == 4, "BEGIN IMMEDIATE, SELECT, UPDATE, COMMIT"

    seen: list[tuple[Point, str]] = []

    def action(point: Point) -> bool:
        # The UPDATE has not run: the row is still running at generation 1, for everyone.
        seen.append((point, other.snapshot()[0][1]))
        return True

    hook.arm("finish", 2, action)
    with hook.call("finish"):
        assert queue.finish(task, gen, "done", 2.0) is True
    (point, state), = seen
    assert (point.op, point.index, point.locked) == ("finish", 2, False)
    assert point.sql.startswith("UPDATE jobs SET status = 'done'") and "'t1'" in point.sql
    assert state == "running"
    assert hook.trap is None and hook.counts["finish"] == 2


def test_a_statement_under_the_write_lock_is_offered_locked_and_a_call_without_a_free_one_passes(
        tmp_path: Path, mistakes) -> None:  # fmt: skip
    hook = StatementHook()
    queue = opened(hook, mistakes.UserQueue, tmp_path / "q.db")
    queue.register("t1", 0.0)
    queue.register("t2", 0.0)
    with hook.call("claim"):
        queue.claim("w1", 1.0, 10.0)
    offered: list[Point] = []
    hook.arm("claim", 2, lambda p: offered.append(p) is not None)  # passes every point (returns False)
    with hook.call("claim"):
        assert queue.claim("w1", 1.0, 10.0) is not None
    assert [(p.index, p.locked) for p in offered] == [(2, True), (3, True), (4, True)]
    assert offered[-1].sql == "COMMIT"
    assert hook.trap is None and hook.passed == "claim"


class _TriggeredQueue:
    """A queue whose finish is one autocommit UPDATE on a table with a trigger (as takeover's
    litequeue adapter counts generations): the trigger's program is reported as a statement while
    the UPDATE runs and holds the write lock."""

    def __init__(self, path: str) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.executescript(
            "CREATE TABLE IF NOT EXISTS jobs (id TEXT PRIMARY KEY, status TEXT);"
            "CREATE TABLE IF NOT EXISTS moves (id TEXT);"
            "CREATE TRIGGER IF NOT EXISTS counted AFTER UPDATE OF status ON jobs "
            "WHEN NEW.status = 'running' BEGIN INSERT INTO moves VALUES (NEW.id); END;"
        )

    def finish(self, task: str) -> bool:
        self.conn.execute("SELECT status FROM jobs WHERE id = ?", (task,)).fetchone()
        self.conn.execute("UPDATE jobs SET status = 'done' WHERE id = ?", (task,))
        return self.conn.execute("SELECT changes()").fetchone()[0] == 1


def test_a_trigger_inside_an_autocommit_write_is_offered_locked(tmp_path: Path) -> None:
    """Every point offered says ``locked`` exactly when another connection cannot take the write
    lock there: the trigger's report, inside the UPDATE, is locked (a worker stopped there held up
    every writer, the coordinator included: litequeue's stalled stress runs)."""
    hook = StatementHook()
    queue = opened(hook, _TriggeredQueue, tmp_path / "q.db")
    queue.conn.execute("INSERT INTO jobs VALUES ('t1', 'running')")
    other = sqlite3.connect(str(tmp_path / "q.db"), isolation_level=None, timeout=0)

    def writable() -> bool:
        try:
            other.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:
            return False
        other.execute("ROLLBACK")
        return True

    offered: list[tuple[int, str, bool, bool]] = []
    hook.arm("finish", 1, lambda p: offered.append((p.index, p.sql.split()[0], p.locked, writable())) is not None)
    with hook.call("finish"):
        assert queue.finish("t1") is True
    assert [(i, head, locked) for i, head, locked, _ in offered] == [
        (1, "SELECT", False),
        (2, "UPDATE", False),
        (3, "UPDATE", True),
        (4, "SELECT", False),
    ]
    assert all(locked is not free for _, _, locked, free in offered), offered


def test_once_every_call_is_learned_and_nothing_is_armed_the_callbacks_are_off(tmp_path: Path, mistakes) -> None:
    hook = StatementHook()
    queue = opened(hook, mistakes.UserQueue, tmp_path / "q.db")
    queue.register("t0", 0.0)
    for _ in range(LEARN):
        with hook.call("finish"):
            queue.finish("t0", 1, "done", 1.0)
    assert hook.counts == {"finish": 1} and hook.active
    with hook.call("finish"):
        queue.finish("t0", 1, "done", 1.0)
        assert hook.seen == 0, "a statement reached the hook with nothing to learn and nothing armed"
    assert not hook.active
    hook.arm("finish", 1, lambda p: True)
    with hook.call("finish"):
        queue.finish("t0", 1, "done", 1.0)
        assert hook.seen == 1 and hook.trap is None, "armed, the callbacks are back"


def test_connect_is_given_back(tmp_path: Path) -> None:
    hook = StatementHook()
    before = sqlite3.connect
    with hook.watching():
        assert sqlite3.connect is not before
        conn = sqlite3.connect(str(tmp_path / "a.db"))
    assert sqlite3.connect is before
    with hook.call("finish"):
        conn.execute("SELECT 1")
    assert hook.counts == {"finish": 1}
    plain = sqlite3.connect(str(tmp_path / "a.db"))
    with hook.call("claim"):
        plain.execute("SELECT 1")
    assert "claim" not in hook.counts, "a connection opened after the block was watched"
    conn.close()
    plain.close()


def test_the_statement_frozen_before_is_between_two_of_the_calls_own_when_there_are_two() -> None:
    from takeover._internal.run.freeze_in_call import statement_index

    assert statement_index(1, 0.99) == 1
    assert {statement_index(2, s / 10) for s in range(10)} == {2}
    assert {statement_index(4, s / 10) for s in range(10)} == {2, 3, 4}


def test_the_watched_queue_offers_exactly_the_methods_the_queue_has(tmp_path: Path, mistakes) -> None:
    """has_extension() on the worker's queue must see what it would see on the queue itself."""
    import multiprocessing

    from takeover._internal.history import HistoryWriter
    from takeover._internal.run.freeze_in_call import CallFreezer
    from takeover._internal.run.phases import PhaseBoard
    from takeover.contract import has_extension

    board = PhaseBoard.create(multiprocessing.get_context("spawn"), 1)
    hist = HistoryWriter(tmp_path / "h.jsonl", 1)

    class NoExtend(mistakes.UserQueue):
        extend = None

    for cls, extends in ((mistakes.UserQueue, True), (NoExtend, False)):
        queue = CallFreezer(board, 0, hist, "w0").open(lambda c=cls: c(str(tmp_path / f"{c.__name__}.db")))
        assert has_extension(queue, "extend") is extends
        assert has_extension(queue, "register_many") is False
        queue.register("t1", 0.0)
        assert queue.claim("w1", 1.0, 10.0) == ("t1", 1, 11.0)
        assert queue.snapshot() == [("t1", "running", 1, 11.0)], "what the wrapper does not scope is the queue's own"
        queue.close()
    hist.close()


def test_freeze_windows_that_found_every_statement_under_the_write_lock_raise_no_never_hit_warning() -> None:
    """A correct transactional SQLite queue gives freeze_in_call nothing to try: no warning for it; a run
    whose windows missed for any other reason (the workers never got there) still says so."""
    from takeover._internal.checker.counts import NO_END, PHASE_ENDED, _nothing_to_try

    locked = "the finish call held SQLite's write lock from the armed statement to its end: nothing can run " \
             "between those statements"  # fmt: skip

    assert _nothing_to_try({"total": 3, "hit": 0, "missed": 3, "reasons": {locked: 2, PHASE_ENDED: 1}})
    assert _nothing_to_try({"total": 2, "hit": 0, "missed": 2, "reasons": {locked: 1, NO_END: 1}})
    assert not _nothing_to_try({"total": 1, "hit": 0, "missed": 1, "reasons": {PHASE_ENDED: 1}})
    assert not _nothing_to_try({"total": 2, "hit": 0, "missed": 2, "reasons": {locked: 1, "no worker was free": 1}})
