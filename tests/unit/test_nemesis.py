"""The nemesis's choices, driven tick by tick over a real phase board in this process."""

from __future__ import annotations

from takeover._internal.config import RunConfig
from takeover._internal.options import FAULT_KINDS


def _random_kill_targets(busy_hunts: bool) -> list[int]:
    """Drive a real Nemesis over a real phase board for 6 simulated seconds; with ``busy_hunts`` the
    during_finish hunts see targets that move on at every probe (misses), as on a loaded machine."""
    import dataclasses as dc
    import multiprocessing

    from takeover._internal.run.nemesis import Nemesis
    from takeover._internal.run.phases import PhaseBoard

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


def test_with_observed_stalls_each_pause_lasts_one_of_them_whatever_the_lease():
    """--pause-time-file: a pause is a ``stall`` of a drawn observed length, not one of the lease-relative classes."""
    import dataclasses as dc
    import multiprocessing
    import time

    from takeover._internal.run.nemesis import Nemesis
    from takeover._internal.run.phases import PhaseBoard

    stalls = (0.5, 2.0, 9.0)
    faults = {k: 0.0 for k in FAULT_KINDS} | {"pause": 20.0}
    cfg = RunConfig(workers=4, seed=5, lease=1.0, faults=faults, pause_time_samples=stalls)
    board = PhaseBoard.create(multiprocessing.get_context("spawn"), cfg.workers)
    for slot in range(cfg.workers):
        board.set_owner(slot, slot + 1, 0)
        board.publish(slot, "working", time.time() + 1.0)
    paused = []
    nemesis = Nemesis(cfg, board, live_slots=lambda: list(range(cfg.workers)),
                      probe=lambda s: dc.replace(board.read(s), phase="working", lease_until=time.time() + 1.0),
                      release=lambda s: None, kill=lambda s, a, v: v.phase, pause=lambda s, p: paused.append(p),
                      resume=lambda p: None)  # fmt: skip
    now = time.time()
    nemesis.start(now)
    for step in range(200):
        nemesis.tick(now + step * 0.01)
    assert len(paused) >= cfg.workers
    assert {p.klass for p in paused} == {"stall"} and {p.planned for p in paused} <= set(stalls)
