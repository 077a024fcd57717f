"""The phase board's readiness, over a real shared array in this process (the coordinator's drain and the
run's start read it; tests/system/test_stress_robustness.py has a run whose workers are slow to start)."""

from __future__ import annotations

import multiprocessing

from takeover._internal.run.board_layout import SEQ
from takeover._internal.run.phases import PhaseBoard


def test_a_respawned_worker_is_not_ready_until_it_has_opened_its_queue() -> None:
    board = PhaseBoard.create(multiprocessing.get_context("spawn"), 2)
    board.set_owner(0, 1, 100)
    assert not board.ready(0)
    board.publish(0, "idle", 1000.0)  # its queue is open
    assert board.ready(0) and not board.ready(1)
    board.set_owner(0, 3, 101)  # killed, and a new incarnation started in the slot
    assert not board.ready(0)


def test_a_slots_publisher_writes_that_slot_alone_and_leaves_it_readable() -> None:
    """The worker's publish (PhaseBoard.publisher) stores each field where a reader looks for it, in its own
    slot only, and leaves the sequence even (not mid-write) after every call."""
    board = PhaseBoard.create(multiprocessing.get_context("spawn"), 3)
    for slot in range(3):
        board.set_owner(slot, slot + 1, 100 + slot)
    publish = board.publisher(1)
    publish("acting", 1000.5, 42, 7, 1060.25)
    view, others = board.read(1), (board.read(0), board.read(2))
    assert (view.phase, view.since, view.task, view.gen, view.lease_until) == ("acting", 1000.5, 42, 7, 1060.25)
    assert (view.process, view.pid) == (2, 101)
    assert all(o.phase == "idle" and o.task == -1 and o.since == 0.0 for o in others)
    publish("idle", 1001.0, -1, 0, 0.0)
    assert (board.phase(1), board.read(1).task, board.read(1).lease_until) == ("idle", -1, 0.0)
    assert board.field(1, SEQ) == 4.0  # two steps per publish: even once each is done
