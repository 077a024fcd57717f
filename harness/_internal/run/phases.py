"""The phase board: what every worker slot is doing right now, in shared memory.

Why shared memory and not messages: the nemesis must aim a SIGKILL at a phase (before the
action, in the S5 window after it, during finish) with microsecond-fresh information, and after
the kill it must know where the process really was. A dead process cannot update the board, so
the slot keeps the phase it had at the instant of death: reading it after the reap tells the
truth about where the kill landed, whatever the nemesis believed before sending it.

Layout: one ``RawArray('d')`` (no locks, so no semaphore and no resource-tracker process);
``SLOT_WIDTH`` doubles per slot plus a header, every offset from one declaration
(takeover._internal.run.board_layout). Aligned 8-byte stores are atomic on the machines
we run on; a per-slot sequence number (odd while writing) lets a reader get a consistent view.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from takeover._internal.run.board_asks import AsksBoard
from takeover._internal.run.board_gate import GateBoard
from takeover._internal.run.board_layout import (
    ACTIONS,
    BEAT_ASK,
    CLOCK_JUMPS,
    DONE,
    EXTEND_CALLS,
    FREEZE_ARM,
    FREEZE_SEEN,
    GEN,
    H_FAULTS,
    H_STARTED,
    H_STOP,
    HEADER,
    LEASE_UNTIL,
    LOSE_ASK,
    LOST,
    OPEN_FAULTS,
    PHASE,
    PID,
    PROCESS,
    RACE,
    SEQ,
    SINCE,
    SLOT_WIDTH,
    SLOWED,
    TASK,
)
from takeover._internal.run.wake import WakeWord

# ``finishing`` is exactly the finish call; ``finished`` is after it returned, before its completion
# is recorded (so a kill there is not counted as during_finish). ``held``: about to claim, and waiting
# because an aimed fault holds every claim back (the claim gate, below).
PHASES = ("idle", "claiming", "working", "acting", "acted", "finishing", "finished", "stopped", "held")
PHASE_CODE = {name: i for i, name in enumerate(PHASES)}
HOLDING = ("working", "acting", "acted", "finishing")

# The board's fields and their offsets: takeover._internal.run.board_layout, one declaration.
START_POLL = 0.002  # how often a worker that is ready looks whether the run has started
# Counters summed over all incarnations of a slot (progress display, fallback summary).
COUNTERS = {"done": DONE, "actions": ACTIONS, "lose_reply": LOST, "slow": SLOWED}
# Faults the worker itself records (invoke ... ok) and has not closed yet, as bits in OPEN_FAULTS: when
# the worker dies in between, the coordinator closes them with ``info`` (docs/history.md).
FAULT_BITS = {"slow": 1, "lose_reply": 2}


# A slot's publish (:meth:`PhaseBoard.publisher`): phase, now, task index, generation, lease end.
Publish = Callable[[str, float, int, int, float], None]


@dataclass(frozen=True)
class SlotView:
    slot: int
    phase: str
    task: int  # the task's index (task ids are t000123); -1 when none
    gen: int
    lease_until: float
    process: int
    pid: int
    done: int  # finishes accepted by this slot, all incarnations
    since: float  # when the phase was entered (time.time())


class PhaseBoard(GateBoard, AsksBoard):
    """The whole board; pickled into each spawned worker with its slot number. Here: the run's start and
    stop and each slot's phase, counters and open faults; the claim gate and its race are
    :class:`~takeover._internal.run.board_gate.GateBoard`'s, the nemesis' asks of one worker
    :class:`~takeover._internal.run.board_asks.AsksBoard`'s."""

    @classmethod
    def create(cls, ctx: Any, slots: int) -> PhaseBoard:
        return cls(ctx.RawArray("d", HEADER + slots * SLOT_WIDTH), slots, WakeWord.create(ctx))

    # -- header -------------------------------------------------------------------------------
    def request_stop(self) -> None:
        self.array[H_STOP] = 1.0

    def stop_requested(self) -> bool:
        return self.array[H_STOP] != 0.0

    def start(self) -> None:
        """The run begins: every worker waiting in :meth:`wait_start` claims from now on."""
        self.array[H_STARTED] = 1.0

    def wait_start(self, stop: Callable[[], bool]) -> None:
        """A worker that opened the queue: wait until the run starts (or ``stop()`` says to stop).

        Why: process start-up takes 0.3-2 s on a loaded machine, and a run's clock, its faulted phase and
        every time to detection count from its start; so the coordinator starts the run once its workers
        are ready (:meth:`ready`), and they all begin together, on time. A worker started later (a
        respawn) finds the run started and goes on at once."""
        while self.array[H_STARTED] == 0.0 and not stop():
            time.sleep(START_POLL)

    def ready(self, slot: int) -> bool:
        """Whether the worker in ``slot`` has published a phase: it does so once its queue is open."""
        return self.array[self._base(slot) + SINCE] > 0

    def set_faults_enabled(self, enabled: bool) -> None:
        self.array[H_FAULTS] = 1.0 if enabled else 0.0

    def faults_enabled(self) -> bool:
        return self.array[H_FAULTS] != 0.0

    # -- slots ----------------------------------------------------------------------------------
    def publish(
        self, slot: int, phase: str, now: float, task: int = -1, gen: int = 0, lease_until: float = 0.0
    ) -> None:
        """Called by the worker that owns the slot, only; the seqlock makes readers consistent. One write: a
        worker publishing per task holds its slot's :meth:`publisher` instead (its offsets worked out once)."""
        self.publisher(slot)(phase, now, task, gen, lease_until)

    def publisher(self, slot: int) -> Publish:
        """The slot's :meth:`publish`, for the worker that owns it: the same stores in the same order, the
        slot's offsets worked out once.

        Why: a worker publishes seven phases per task, and working out the offsets through method calls at
        each one was a third of a worker's publish: 0.69 us of CPU before, 0.41 us with this and the task's
        index kept per task (workloads/worker.py), 1.7 us less per task."""
        a, b = self.array, self._base(slot)
        seq, task_at, gen_at, lease_at, since_at, phase_at = (b + SEQ, b + TASK, b + GEN, b + LEASE_UNTIL,
                                                             b + SINCE, b + PHASE)  # fmt: skip
        codes = PHASE_CODE

        def publish(phase: str, now: float, task: int = -1, gen: int = 0, lease_until: float = 0.0) -> None:
            odd = a[seq] + 1.0  # odd while writing: a reader that sees it (or a change of it) reads again
            a[seq] = odd
            a[task_at] = task
            a[gen_at] = gen
            a[lease_at] = lease_until
            a[since_at] = now
            a[phase_at] = codes[phase]
            a[seq] = odd + 1.0

        return publish

    def set_owner(self, slot: int, process: int, pid: int) -> None:
        a, b = self.array, self._base(slot)
        a[b + SEQ] = 0.0
        a[b + PROCESS] = process
        a[b + PID] = pid
        a[b + PHASE] = PHASE_CODE["idle"]
        a[b + TASK] = -1
        a[b + SINCE] = 0.0  # not ready (:meth:`ready`) until this incarnation has opened its queue
        a[b + OPEN_FAULTS] = 0.0
        # A racer killed while it waited for a partner must not be waited for; one killed after it left
        # (its claim's holder is the nemesis' favourite target) keeps when it left, for the stampede's record.
        if a[b + RACE] > 0:
            a[b + RACE] = 0.0
        # A new incarnation starts from its own skew: jumps aimed at the one before are not its. Jumps posted
        # from here on are, even before it first reads its clock (starting a process can take a second).
        a[b + CLOCK_JUMPS] = 0.0
        a[b + BEAT_ASK] = 0.0  # a heartbeat asked of the dead incarnation is not the new one's
        a[b + LOSE_ASK] = 0.0
        a[b + EXTEND_CALLS] = 0.0
        a[b + FREEZE_ARM] = 0.0  # a freeze armed for the one before is not this one's
        a[b + FREEZE_SEEN] = 0.0

    def count(self, slot: int, counter: int) -> None:
        """Only the slot's live worker increments its counters: no lost updates without a lock."""
        self.array[self._base(slot) + counter] += 1.0

    def open_fault(self, slot: int, kind: str) -> None:
        """The slot's worker has written the fault's invoke (call this after it, never before)."""
        i = self._base(slot) + OPEN_FAULTS
        self.array[i] = float(int(self.array[i]) | FAULT_BITS[kind])

    def close_fault(self, slot: int, kind: str) -> None:
        """The worker is about to write the fault's completion (call this before it, never after).

        Why this order: a death between the two steps then leaves the fault open, as it would be
        without the board, and never makes the coordinator write a completion twice or for a fault
        that has no invoke.
        """
        i = self._base(slot) + OPEN_FAULTS
        self.array[i] = float(int(self.array[i]) & ~FAULT_BITS[kind])

    def open_faults(self, slot: int) -> list[str]:
        """The faults a (dead) incarnation left open, in FAULT_BITS order."""
        bits = int(self.array[self._base(slot) + OPEN_FAULTS])
        return [kind for kind, bit in FAULT_BITS.items() if bits & bit]

    def phase(self, slot: int) -> str:
        """The one value the nemesis polls at high rate: no seqlock needed for a single store."""
        return PHASES[int(self.array[self._base(slot) + PHASE])]

    def read(self, slot: int) -> SlotView:
        a, b = self.array, self._base(slot)
        for _ in range(100):
            seq = a[b + SEQ]
            values = a[b : b + SLOT_WIDTH]
            if seq % 2 == 0 and a[b + SEQ] == seq:
                break
        # A writer killed mid-update leaves an odd sequence: the last values are still the best we have.
        return SlotView(
            slot=slot,
            phase=PHASES[int(values[PHASE])],
            task=int(values[TASK]),
            gen=int(values[GEN]),
            lease_until=values[LEASE_UNTIL],
            process=int(values[PROCESS]),
            pid=int(values[PID]),
            done=int(values[DONE]),
            since=values[SINCE],
        )

    def total(self, counter: int) -> int:
        return sum(int(self.array[self._base(s) + counter]) for s in range(self.slots))


def task_id(index: int) -> str:
    return f"t{index:06d}"


def task_index(task: str) -> int:
    try:
        return int(task[1:]) if task.startswith("t") else -1
    except ValueError:
        return -1
