"""Clock faults: each worker incarnation's clock offset (skew), and steps of a running worker's clock (jumps).

Why through ``now`` and not the system clock: leases are wall-clock deadlines that every process reads
from its own clock, and a clock that is off, or steps (NTP, a VM migration), makes a lease expire early
or late. The queue contract already passes the clock in: a queue judges leases by the ``now`` it is
given, and an adapter patches its library's clock to that ``now`` (docs/adapters.md). So a worker's
clock is ``time.time()`` plus its offset, and every ``now`` it passes is read from it. Nothing else in
the process moves: its sleeps and timeouts, and the ``time`` of every history record, stay on the real
clock (libfaketime, the other way to do this, breaks Python's timed waits). The history therefore holds
the real time of each call beside the ``now`` it was given, and the checker can tell what the clocks did.

Every choice comes from ``--seed``: an incarnation's skew from its own stream (``clock_skew:<process>``),
uniform in ``[-clock_skew_max, +clock_skew_max]``; the jumps from the nemesis' stream ``clock_jump``, on
its stratified plan at ``clock_jump_rate`` per second, each aimed at a live worker and uniform in
``[-clock_jump_max, +clock_jump_max]``. Sizes are whole milliseconds, so the history's text of each
value is the exact offset the worker used.

How a jump reaches a running worker: the nemesis adds it to the slot's jump total on the phase board
(the channel the nemesis already uses to talk to workers), and the worker, before it reads its clock
for a call, applies whatever was added since it last looked, recording the step itself (so the step
sits exactly between the calls it separates in the history).
"""

from __future__ import annotations

import random
import time

from takeover._internal.history import HistoryWriter
from takeover._internal.run.nemesis import CLOCK_JUMP, draw_ms
from takeover._internal.run.phases import PhaseBoard
from takeover._internal.seeds import stream_seed

SKEW = "clock_skew"  # history ``f`` of an incarnation's offset, recorded once when it starts
JUMP = CLOCK_JUMP  # history ``f`` of a step of a running worker's clock


def skew_of(seed: int, process: int, largest: float) -> float:
    """Worker incarnation ``process``'s clock offset: the same for the same seed whatever else the run does."""
    return draw_ms(random.Random(stream_seed(seed, f"{SKEW}:{process}")), largest)


class WorkerClock:
    """One worker incarnation's clock: the real clock plus its skew plus the jumps applied so far."""

    def __init__(self, offset: float, board: PhaseBoard, slot: int) -> None:
        self.offset = offset
        self.board = board
        self.slot = slot
        # The slot's total starts at 0 for each incarnation (PhaseBoard.set_owner, at its spawn).
        self.applied = 0.0

    def pending(self) -> float:
        """The step posted since the last look (0.0 when none), taken: the caller applies and records it."""
        total = self.board.clock_jumps(self.slot)
        if total == self.applied:
            return 0.0
        step = round(total - self.applied, 6)
        self.applied = total
        self.offset = round(self.offset + step, 6)
        return step

    def now(self) -> float:
        return time.time() + self.offset

    def real(self, t: float) -> float:
        """A time on this clock (a lease's end) as the real clock reads it at that instant."""
        return t - self.offset


def record_skew(hist: HistoryWriter, process: int, worker: str, offset: float) -> None:
    """The incarnation's offset, as a fault pair written before its first call (docs/history.md)."""
    hist.write("invoke", SKEW, target=process, worker=worker, value=repr(offset))
    hist.write("ok", SKEW, target=process, worker=worker, value=repr(offset))


def record_jump(hist: HistoryWriter, process: int, worker: str, step: float, offset: float) -> None:
    """A step of the clock, as a fault pair written between the two calls it separates; ``detail`` is
    the offset it left."""
    fields = {"target": process, "worker": worker, "value": repr(step), "detail": f"offset {offset!r}"}
    hist.write("invoke", JUMP, **fields)
    hist.write("ok", JUMP, **fields)
