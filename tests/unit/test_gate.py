"""The claim gate: held workers (real processes) sleep on one futex word and leave when their hold ends,
not on an unrelated wake-up, nor stay for a later hold, and stop waiting when told to stop; and the
line-up's rules for racers let go together, on a board set by hand: a racer leaves with a partner that
runs at the same moment on another core, never with one on its own core, alone once every other racer
has left, and at the deadline. What a stampede does to a real queue is tested in tests/system/test_aimed.py.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from typing import Any

import pytest

from takeover._internal.run.board_layout import HEADER, RACE, RACE_BEAT, RACE_CORE, RACE_WITH, SLOT_WIDTH
from takeover._internal.run.phases import PhaseBoard

pytestmark = pytest.mark.timeout(60)

CTX = multiprocessing.get_context("spawn")  # the board, as a run makes it
FORK = multiprocessing.get_context("fork")  # the held workers: this module's functions need no import


def _held(board: PhaseBoard, slot: int, hold: int, stop_on_request: int) -> None:
    """A held worker, reduced to the gate: publish ``held``, wait for the hold and line up, publish
    ``claiming`` (stop_on_request: also stop waiting when the board asks every worker to stop)."""
    policy, affinity = os.sched_getscheduler(0), os.sched_getaffinity(0)
    board.publish(slot, "held", time.time())
    boosted = board.hold_back(slot, hold, board.stop_requested if stop_on_request else (lambda: False))
    board.publish(slot, "claiming", time.time())
    if boosted is not None:
        boosted.undo()
    if (os.sched_getscheduler(0), os.sched_getaffinity(0)) != (policy, affinity):
        os._exit(3)  # the racer's scheduling was not put back


def _start(board: PhaseBoard, slots: int, hold: int, stop_on_request: int = 0) -> list[Any]:
    procs = [FORK.Process(target=_held, args=(board, s, hold, stop_on_request), daemon=True) for s in range(slots)]
    for p in procs:
        p.start()
    deadline = time.time() + 30
    while any(board.phase(s) != "held" for s in range(slots)):
        assert time.time() < deadline, "the workers never reached the gate"
        time.sleep(0.01)
    return procs


def _joined(procs: list[Any]) -> list[int | None]:
    for p in procs:
        p.join(20)
    return [p.exitcode for p in procs]


def _field(board: PhaseBoard, slot: int, field: int) -> float:
    return float(board.array[HEADER + slot * SLOT_WIDTH + field])


def _set(board: PhaseBoard, slot: int, **fields: float) -> None:
    names = {"race": RACE, "beat": RACE_BEAT, "core": RACE_CORE, "offer": RACE_WITH}
    for name, value in fields.items():
        board.array[HEADER + slot * SLOT_WIDTH + names[name]] = value


def test_held_workers_stay_through_another_wake_up_and_all_leave_when_their_hold_ends() -> None:
    board = PhaseBoard.create(CTX, 4)
    board.close_gate(7)
    procs = _start(board, 4, hold=7)
    board.wake.wake_all()  # a wake-up, but hold 7 goes on: nobody leaves
    time.sleep(0.2)
    assert [board.phase(s) for s in range(4)] == ["held"] * 4
    board.race(7, [0, 1, 2, 3], time.time() + 5.0)
    board.open_gate()
    assert _joined(procs) == [0, 0, 0, 0], "a worker did not leave, or kept its racer's scheduling"
    assert [board.phase(s) for s in range(4)] == ["claiming"] * 4
    assert [_field(board, s, RACE) for s in range(4)] == [-7.0] * 4, "each left the line of hold 7"
    assert sorted(board.left_line(7, [0, 1, 2, 3])) == [0, 1, 2, 3]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one core: every racer waits on it")
def test_racers_let_go_wait_on_different_cores_whatever_their_slots() -> None:
    """Slots 0 and 2 are held on one core (slot modulo 2 cores); let go as the only two racers, they
    line up on two (their ranks), where they can run at the same moment."""
    board = PhaseBoard.create(CTX, 3)
    board.close_gate(8)
    procs = [FORK.Process(target=_held, args=(board, s, 8, 0), daemon=True) for s in (0, 2)]
    for p in procs:
        p.start()
    deadline = time.time() + 30
    while board.phase(0) != "held" or board.phase(2) != "held":
        assert time.time() < deadline, "the workers never reached the gate"
        time.sleep(0.01)
    board.race(8, [0, 2], time.time() + 5.0)
    board.open_gate()
    assert _joined(procs) == [0, 0]
    assert _field(board, 0, RACE_CORE) != _field(board, 2, RACE_CORE)


def test_a_worker_let_go_from_an_earlier_hold_leaves_when_a_later_hold_closes_the_gate() -> None:
    board = PhaseBoard.create(CTX, 1)
    board.close_gate(1)
    procs = _start(board, 1, hold=1)
    board.close_gate(2)  # hold 1 ended and hold 2 began before the worker ran
    board.wake.wake_all()
    assert _joined(procs) == [0]
    assert board.read(0).phase == "claiming"


def test_a_held_worker_stops_waiting_when_told_to_stop() -> None:
    board = PhaseBoard.create(CTX, 2)
    board.close_gate(3)
    procs = _start(board, 2, hold=3, stop_on_request=1)
    board.request_stop()  # no wake-up: the waiters notice within their wait step
    assert _joined(procs) == [0, 0]
    assert board.gate() == 3


def test_without_a_race_asked_a_released_worker_does_not_wait_for_a_partner() -> None:
    board = PhaseBoard.create(CTX, 2)
    board.close_gate(5)
    procs = _start(board, 1, hold=5)  # slot 1 never comes: a race would have it wait an hour
    board.race(4, [0, 1], time.time() + 3600)  # a race of another hold
    board.open_gate()
    assert _joined(procs) == [0]
    assert _field(board, 0, RACE) == 0.0, "it lined up for a race nobody asked for"


def _line_up(board: PhaseBoard, until: float, workers: int = 2) -> float:
    """Slot 0 (on core 0) lines up for hold 9; when it left."""
    _set(board, 0, core=0)
    board.race(9, list(range(workers)), until)
    board.line_up(0, 9)
    assert _field(board, 0, RACE) == -9.0
    return _field(board, 0, RACE_BEAT)


SLOT0 = HEADER  # slot 0's place on the board: what a racer that offers itself to slot 0 writes


def test_a_racer_leaves_with_a_partner_running_on_another_core_that_offers_itself_back() -> None:
    board = PhaseBoard.create(CTX, 3)
    _set(board, 1, race=9, beat=time.time() + 3600, core=1, offer=SLOT0)  # looks fresh whenever slot 0 looks
    _set(board, 2, race=9, beat=0.0, core=0)  # a third racer, not running: slot 0 may not go alone
    _line_up(board, until=time.time() + 3600, workers=3)
    assert _field(board, 0, RACE_WITH) == HEADER + SLOT_WIDTH, "it offered itself to slot 1"


def test_a_racer_follows_a_partner_that_left_with_it() -> None:
    board = PhaseBoard.create(CTX, 3)
    _set(board, 1, race=-9, beat=1.0, core=1, offer=SLOT0)  # left long ago, with slot 0
    _set(board, 2, race=9, beat=0.0, core=0)
    _line_up(board, until=time.time() + 3600, workers=3)


def test_a_racer_not_seen_back_by_its_partner_does_not_leave_alone() -> None:
    board = PhaseBoard.create(CTX, 2)
    _set(board, 1, race=9, beat=time.time() + 3600, core=1)  # seems to run, but never offers itself back
    until = time.time() + 0.05
    assert _line_up(board, until) >= until


def test_a_racer_on_the_same_core_is_no_partner() -> None:
    board = PhaseBoard.create(CTX, 2)
    _set(board, 1, race=9, beat=time.time() + 3600, core=0)  # fresh, but on slot 0's core
    until = time.time() + 0.05
    assert _line_up(board, until) >= until, "it left with a racer that cannot run at the same moment"


def test_a_racer_leaves_alone_once_every_other_racer_has_left() -> None:
    board = PhaseBoard.create(CTX, 3)
    _set(board, 1, race=-9, beat=1.0, core=1)
    _set(board, 2, race=-9, beat=1.0, core=0)
    _line_up(board, until=time.time() + 3600, workers=3)


def test_a_racer_whose_partner_never_runs_leaves_at_the_deadline() -> None:
    board = PhaseBoard.create(CTX, 2)
    _set(board, 1, race=9, beat=1.0, core=1)  # lined up long ago, not running since
    until = time.time() + 0.05
    assert _line_up(board, until) >= until


def test_a_new_incarnation_forgets_a_racer_still_waiting_but_not_when_one_left() -> None:
    board = PhaseBoard.create(CTX, 2)
    _set(board, 0, race=9, beat=5.0)  # killed while it waited for a partner
    _set(board, 1, race=-9, beat=6.0)  # killed after it left, in the claim it raced
    board.set_owner(0, 3, 0)
    board.set_owner(1, 4, 0)
    assert _field(board, 0, RACE) == 0.0, "the others would wait for a dead racer"
    assert board.left_line(9, [0, 1]) == {1: 6.0}


def _ready_then_claim(board: PhaseBoard, slot: int) -> None:
    """A worker reduced to its start: ready (a published phase), then wait for the run's start, then claim."""
    board.publish(slot, "idle", time.time())
    board.wait_start(lambda: False)
    board.publish(slot, "claiming", time.time())


def test_ready_workers_wait_for_the_runs_start_and_then_go_together() -> None:
    """A run starts once its workers are ready (PhaseBoard.ready), and they claim only after it."""
    board = PhaseBoard.create(CTX, 2)
    for s in range(2):
        board.set_owner(s, s + 1, 0)
    assert not any(board.ready(s) for s in range(2)), "a slot that published nothing is not ready"
    procs = [FORK.Process(target=_ready_then_claim, args=(board, s), daemon=True) for s in range(2)]
    for p in procs:
        p.start()
    try:
        end = time.time() + 30
        while not all(board.ready(s) for s in range(2)) and time.time() < end:
            time.sleep(0.01)
        assert all(board.ready(s) for s in range(2))
        time.sleep(0.2)  # ready, and waiting: no claim before the start
        assert [board.phase(s) for s in range(2)] == ["idle", "idle"]
        board.start()
        for p in procs:
            p.join(10)
        assert [p.exitcode for p in procs] == [0, 0]
        assert [board.phase(s) for s in range(2)] == ["claiming", "claiming"]
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
