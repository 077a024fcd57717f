"""The claim gate with real processes: held workers sleep on one futex word and leave when their hold
ends (not on an unrelated wake-up), racers let go together leave in pairs, and a waiter notices when it
is told to stop. What a stampede does to a real queue is tested in tests/system/test_aimed.py.
"""

from __future__ import annotations

import multiprocessing
import time
from typing import Any

import pytest

from takeover.run.phases import HEADER, PARTNER_FRESH, RACE, RACE_BEAT, SLOT_WIDTH, PhaseBoard

pytestmark = pytest.mark.timeout(60)

CTX = multiprocessing.get_context("spawn")  # the board, as a run makes it
FORK = multiprocessing.get_context("fork")  # the held workers: this module's functions need no import


def _held(board: PhaseBoard, slot: int, hold: int, stop_on_request: int) -> None:
    """A held worker, reduced to the gate: publish ``held``, wait for the hold, line up, publish
    ``claiming`` (stop_on_request: also stop waiting when the board asks every worker to stop)."""
    board.publish(slot, "held", time.time())
    board.wait_gate(hold, board.stop_requested if stop_on_request else (lambda: False))
    board.line_up(slot, hold)
    board.publish(slot, "claiming", time.time())


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


def test_held_workers_stay_through_another_wake_up_and_leave_together_when_their_hold_ends() -> None:
    board = PhaseBoard.create(CTX, 4)
    board.close_gate(7)
    procs = _start(board, 4, hold=7)
    board.wake.wake_all()  # a wake-up, but hold 7 goes on: nobody leaves
    time.sleep(0.2)
    assert [board.phase(s) for s in range(4)] == ["held"] * 4
    board.race(7, 4, time.time() + 2.0)
    board.open_gate()
    assert _joined(procs) == [0, 0, 0, 0]
    assert [board.phase(s) for s in range(4)] == ["claiming"] * 4
    a = board.array
    assert [a[HEADER + s * SLOT_WIDTH + RACE] for s in range(4)] == [-7.0] * 4, "each left the line of hold 7"
    raced, span = board.left_together(7, [0, 1, 2, 3], PARTNER_FRESH * 4)
    # each left with a partner running at the same moment (or after every other had left): at
    # least one pair left within microseconds of each other
    assert raced >= 2 and span <= PARTNER_FRESH * 4, (raced, span)


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
    procs = _start(board, 1, hold=5)  # slot 1 never comes: a race would have it wait until the deadline
    board.race(4, 2, time.time() + 3600)  # a race of another hold
    board.open_gate()
    assert _joined(procs) == [0]
    assert board.array[HEADER + RACE] == 0.0 and board.array[HEADER + RACE_BEAT] == 0.0
