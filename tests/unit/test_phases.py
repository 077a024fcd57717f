"""The phase board's readiness, over a real shared array in this process (the coordinator's drain and the
run's start read it; tests/system/test_stress_robustness.py has a run whose workers are slow to start)."""

from __future__ import annotations

import multiprocessing

from takeover._internal.run.phases import PhaseBoard


def test_a_respawned_worker_is_not_ready_until_it_has_opened_its_queue() -> None:
    board = PhaseBoard.create(multiprocessing.get_context("spawn"), 2)
    board.set_owner(0, 1, 100)
    assert not board.ready(0)
    board.publish(0, "idle", 1000.0)  # its queue is open
    assert board.ready(0) and not board.ready(1)
    board.set_owner(0, 3, 101)  # killed, and a new incarnation started in the slot
    assert not board.ready(0)
