"""The phase board: what every worker slot is doing right now, in shared memory.

Why shared memory and not messages: the nemesis must aim a SIGKILL at a phase (before the
action, in the S5 window after it, during finish) with microsecond-fresh information, and after
the kill it must know where the process really was. A dead process cannot update the board, so
the slot keeps the phase it had at the instant of death: reading it after the reap tells the
truth about where the kill landed, whatever the nemesis believed before sending it.

Layout: one ``RawArray('d')`` (no locks, so no semaphore and no resource-tracker process);
``SLOT_WIDTH`` doubles per slot plus a header. Aligned 8-byte stores are atomic on the machines
we run on; a per-slot sequence number (odd while writing) lets a reader get a consistent view.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# ``finishing`` is exactly the finish call; ``finished`` is after it returned, before its completion
# is recorded (so a kill there is not counted as during_finish). ``held``: about to claim, and waiting
# because an aimed fault holds every claim back (the claim gate, below).
PHASES = ("idle", "claiming", "working", "acting", "acted", "finishing", "finished", "stopped", "held")
PHASE_CODE = {name: i for i, name in enumerate(PHASES)}
HOLDING = ("working", "acting", "acted", "finishing")

# Header: [0] stop all workers, [1] faults enabled for worker-drawn faults, [2] the claim gate: 0 when
# open, else the number of the hold that closed it, [3] [4] a registration asked of the workers that
# a hold kept back: the hold's number and the task's index.
HEADER = 6
H_STOP, H_FAULTS, H_GATE, H_REGISTER_HOLD, H_REGISTER_TASK = 0, 1, 2, 3, 4
# Slot fields
SEQ, PHASE, TASK, GEN, LEASE_UNTIL, PROCESS, PID, SINCE = range(8)
# Counters summed over all incarnations of a slot (progress display, fallback summary).
DONE, ACTIONS, LOST, SLOWED = range(8, 12)
COUNTERS = {"done": DONE, "actions": ACTIONS, "lose_reply": LOST, "slow": SLOWED}
# Faults the worker itself records (invoke ... ok) and has not closed yet, as bits: when the
# worker dies in between, the coordinator closes them with ``info`` (docs/history.md).
OPEN_FAULTS = 12
FAULT_BITS = {"slow": 1, "lose_reply": 2}
# Finish calls this incarnation has started (counted after the invoke is written, before the call):
# an aimed fault that resumed a frozen holder sees from it that the holder's finish went out.
FINISH_CALLS = 13
# Clock jumps the nemesis has posted to the slot's incarnation, summed (seconds; takeover.run.clock): a worker
# applies what was added since it last looked, so two jumps posted between two of its looks are one step.
CLOCK_JUMPS = 14
SLOT_WIDTH = 15


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


class PhaseBoard:
    """Wraps the shared array; pickled into each spawned worker with its slot number."""

    def __init__(self, array: Any, slots: int) -> None:
        self.array = array
        self.slots = slots

    @classmethod
    def create(cls, ctx: Any, slots: int) -> PhaseBoard:
        return cls(ctx.RawArray("d", HEADER + slots * SLOT_WIDTH), slots)

    def __getstate__(self) -> dict[str, Any]:
        return {"array": self.array, "slots": self.slots}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.array = state["array"]
        self.slots = state["slots"]

    # -- header -------------------------------------------------------------------------------
    def request_stop(self) -> None:
        self.array[H_STOP] = 1.0

    def stop_requested(self) -> bool:
        return self.array[H_STOP] != 0.0

    def set_faults_enabled(self, enabled: bool) -> None:
        self.array[H_FAULTS] = 1.0 if enabled else 0.0

    def faults_enabled(self) -> bool:
        return self.array[H_FAULTS] != 0.0

    def close_gate(self, hold: int) -> None:
        """Hold every claim back: a worker about to claim waits (phase ``held``) until the gate opens.

        Why a gate and not a freeze: a worker frozen inside a claim may hold the database's write
        lock, and the one worker an aimed fault lets go on would then block behind it. A worker
        waits at the gate only before it enters the claim, so nothing is held while it waits.
        """
        self.array[H_GATE] = float(hold)

    def open_gate(self) -> None:
        self.array[H_GATE] = 0.0

    def gate(self) -> int:
        """0 when claims may go on; else the number of the hold that keeps them back."""
        return int(self.array[H_GATE])

    def ask_register(self, hold: int, task: int) -> None:
        """Ask the workers waiting behind hold ``hold`` to register task ``task`` again once released."""
        self.array[H_REGISTER_TASK] = float(task)
        self.array[H_REGISTER_HOLD] = float(hold)

    def register_request(self, hold: int) -> int:
        """The task a worker released from hold ``hold`` must register again, or -1 for none."""
        if int(self.array[H_REGISTER_HOLD]) != hold:
            return -1
        return int(self.array[H_REGISTER_TASK])

    # -- slots ----------------------------------------------------------------------------------
    def _base(self, slot: int) -> int:
        return HEADER + slot * SLOT_WIDTH

    def publish(
        self, slot: int, phase: str, now: float, task: int = -1, gen: int = 0, lease_until: float = 0.0
    ) -> None:
        """Called by the worker that owns the slot, only; the seqlock makes readers consistent."""
        a, b = self.array, self._base(slot)
        a[b + SEQ] += 1.0
        a[b + TASK] = task
        a[b + GEN] = gen
        a[b + LEASE_UNTIL] = lease_until
        a[b + SINCE] = now
        a[b + PHASE] = PHASE_CODE[phase]
        a[b + SEQ] += 1.0

    def set_owner(self, slot: int, process: int, pid: int) -> None:
        a, b = self.array, self._base(slot)
        a[b + SEQ] = 0.0
        a[b + PROCESS] = process
        a[b + PID] = pid
        a[b + PHASE] = PHASE_CODE["idle"]
        a[b + TASK] = -1
        a[b + OPEN_FAULTS] = 0.0
        # A new incarnation starts from its own skew: jumps aimed at the one before are not its. Jumps posted
        # from here on are, even before it first reads its clock (starting a process can take a second).
        a[b + CLOCK_JUMPS] = 0.0

    def count(self, slot: int, counter: int) -> None:
        """Only the slot's live worker increments its counters: no lost updates without a lock."""
        self.array[self._base(slot) + counter] += 1.0

    def finish_calls(self, slot: int) -> int:
        return int(self.array[self._base(slot) + FINISH_CALLS])

    def post_clock_jump(self, slot: int, seconds: float) -> None:
        """Step the slot's worker clock by ``seconds`` (the nemesis only: one writer, so no lost update)."""
        self.array[self._base(slot) + CLOCK_JUMPS] += seconds

    def clock_jumps(self, slot: int) -> float:
        """Every jump posted to the slot so far, summed; a worker takes the difference to what it applied."""
        return float(self.array[self._base(slot) + CLOCK_JUMPS])

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
