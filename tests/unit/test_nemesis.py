"""The nemesis's choices, driven tick by tick over a real phase board in this process."""

from __future__ import annotations

from takeover.config import RunConfig
from takeover.options import FAULT_KINDS


def _random_kill_targets(busy_hunts: bool) -> list[int]:
    """Drive a real Nemesis over a real phase board for 6 simulated seconds; with ``busy_hunts`` the
    during_finish hunts see targets that move on at every probe (misses), as on a loaded machine."""
    import dataclasses as dc
    import multiprocessing

    from takeover.run.nemesis import Nemesis
    from takeover.run.phases import PhaseBoard

    faults = {k: 0.0 for k in FAULT_KINDS} | {"kill": 2.0, "kill_during_finish": 5.0}
    cfg = RunConfig(workers=4, seed=11, faults=faults)
    board = PhaseBoard.create(multiprocessing.get_context("spawn"), cfg.workers)
    for slot in range(cfg.workers):
        board.set_owner(slot, slot + 1, 0)
        board.publish(slot, "finishing" if busy_hunts else "idle", 0.0)
    killed: list[int] = []

    def kill(slot, aim, view):
        if aim == "random":
            killed.append(slot)
        return view.phase

    nemesis = Nemesis(cfg, board, live_slots=lambda: list(range(cfg.workers)),
                      probe=lambda s: dc.replace(board.read(s), phase="idle"), release=lambda s: None,
                      kill=kill, pause=lambda s, p: None, resume=lambda p: None)  # fmt: skip
    nemesis.start(1000.0)
    for step in range(600):
        nemesis.tick(1000.0 + step * 0.01)
    return killed


def test_random_kill_targets_depend_on_the_seed_not_on_the_hunts():
    quiet, busy = _random_kill_targets(False), _random_kill_targets(True)
    assert len(quiet) >= 10 and len(set(quiet)) > 1
    assert busy == quiet
