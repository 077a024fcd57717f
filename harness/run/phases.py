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

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from takeover.run.wake import Boost, WakeWord, boost

# ``finishing`` is exactly the finish call; ``finished`` is after it returned, before its completion
# is recorded (so a kill there is not counted as during_finish). ``held``: about to claim, and waiting
# because an aimed fault holds every claim back (the claim gate, below).
PHASES = ("idle", "claiming", "working", "acting", "acted", "finishing", "finished", "stopped", "held")
PHASE_CODE = {name: i for i, name in enumerate(PHASES)}
HOLDING = ("working", "acting", "acted", "finishing")

# Header: [0] stop all workers, [1] faults enabled for worker-drawn faults, [2] the claim gate: 0 when
# open, else the number of the hold that closed it, [3] [4] a registration asked of the workers that
# a hold kept back: the hold's number and the task's index; [5] [6] [7] a race asked of the workers a
# hold lets go (:meth:`PhaseBoard.line_up`): the hold's number, how many it lets go, until when they
# wait for each other; [8] the run has started (PhaseBoard.start): workers that opened the queue
# wait for it before their first claim.
HEADER = 9
H_STOP, H_FAULTS, H_GATE, H_REGISTER_HOLD, H_REGISTER_TASK = 0, 1, 2, 3, 4
H_RACE_HOLD, H_RACE_WORKERS, H_RACE_UNTIL = 5, 6, 7
H_STARTED = 8
START_POLL = 0.002  # how often a worker that is ready looks whether the run has started
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
# A race at the gate (line_up): the hold the worker lines up for while it waits for a partner, its
# negative once the worker has left for the claim; and the time it last looked while waiting, which is
# the instant it left once it has.
# RACE_CORE: the core it waits on (-1: unknown); RACE_RANK: its place among the racers the nemesis let go.
# RACE_WITH: the racer it offers itself to, by the board index of that slot (0: none).
RACE, RACE_BEAT, RACE_CORE, RACE_RANK, RACE_WITH = 15, 16, 17, 18, 19
# A freeze inside a queue call (takeover.run.freeze_in_call): the nemesis arms it (FREEZE_ARM: the request's
# number, 0 for none; FREEZE_OP: the call, by its index in CALL_OPS; FREEZE_SPOT: in [0, 1), which of the
# call's statements), the worker answers in FREEZE_SEEN (the request's number once it stops itself, its
# negative when the call passed without a point to stop at) and says where (FREEZE_AT: the statement,
# FREEZE_OF: how many the call issues).
FREEZE_ARM, FREEZE_OP, FREEZE_SPOT, FREEZE_SEEN, FREEZE_AT, FREEZE_OF = 20, 21, 22, 23, 24, 25
# A heartbeat asked of the slot's worker (the stale_heartbeat fault, takeover.run.stale_heartbeat): the
# nemesis sets BEAT_ASK to 1 while the worker is frozen; the worker, at its next step (before its action,
# before its finish), clears it and calls extend() once, whatever --heartbeat is. EXTEND_CALLS counts the
# extends this incarnation has seen return (counted after the completion is recorded).
BEAT_ASK, EXTEND_CALLS = 26, 27
# A lost reply asked of the slot's worker (duplicate_register, when it is dealt an uncertain task and none
# is): the nemesis sets LOSE_ASK to 1; the worker's next action loses its reply (recorded as a lose_reply,
# as a drawn one is), so its task ends uncertain; the worker sets it back to 0 when it takes it.
LOSE_ASK = 28
SLOT_WIDTH = 29
# How the racers of a hold find each other: a racer of that hold on another core that has looked within
# PARTNER_FRESH is running at this very moment (line_up).
PARTNER_FRESH = 0.00005
# A real-time racer still alone after this long yields its core between looks (line_up's ``boosted``):
# before, its looks come a few microseconds apart, and so does its leaving after its partner's.
SHARE_AFTER = 0.001
GATE_WAIT_STEP = 0.1  # a held worker wakes at least this often to notice a stop or its parent's death


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

    def __init__(self, array: Any, slots: int, wake: WakeWord) -> None:
        self.array = array
        self.slots = slots
        self.wake = wake  # what held workers sleep on until their hold ends

    @classmethod
    def create(cls, ctx: Any, slots: int) -> PhaseBoard:
        return cls(ctx.RawArray("d", HEADER + slots * SLOT_WIDTH), slots, WakeWord.create(ctx))

    def __getstate__(self) -> dict[str, Any]:
        return {"array": self.array, "slots": self.slots, "wake": self.wake}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.array = state["array"]
        self.slots = state["slots"]
        self.wake = state["wake"]

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

    def close_gate(self, hold: int) -> None:
        """Hold every claim back: a worker about to claim waits (phase ``held``) until the gate opens.

        Why a gate and not a freeze: a worker frozen inside a claim may hold the database's write
        lock, and the one worker an aimed fault lets go on would then block behind it. A worker
        waits at the gate only before it enters the claim, so nothing is held while it waits.
        """
        self.array[H_GATE] = float(hold)

    def open_gate(self) -> None:
        """Let every held worker go at once: one futex wake-up reaches them all (takeover.run.wake)."""
        self.array[H_GATE] = 0.0
        self.wake.wake_all()

    def gate(self) -> int:
        """0 when claims may go on; else the number of the hold that keeps them back."""
        return int(self.array[H_GATE])

    def wait_gate(self, hold: int, stop: Callable[[], bool]) -> None:
        """A held worker: sleep until hold ``hold`` ends (the gate opened, or a later hold closed it
        again: a worker let go must not stay for the next hold), or ``stop()`` says to stop.

        Why *this* hold and not "the gate is open": the next aimed fault may close the gate a moment
        after this one opened it, before a worker it let go has run, and that worker would then claim
        (or register) hundreds of milliseconds after the others it was let go with.
        """
        while not stop():
            seen = self.wake.value()  # before the look: a wake-up in between changes it (no lost wake-up)
            if self.gate() != hold:
                return
            self.wake.wait(seen, GATE_WAIT_STEP)

    def race(self, hold: int, slots: list[int], until: float) -> None:
        """The nemesis, before it opens the gate: the workers of ``slots`` it lets go from ``hold`` are
        to race, each waiting for a partner at most until ``until``. Each gets its rank among them:
        the racers spread over the cores by rank, so that any two of them wait on different cores."""
        for rank, slot in enumerate(slots):
            self.array[self._base(slot) + RACE_RANK] = float(rank)
        self.array[H_RACE_WORKERS] = float(len(slots))
        self.array[H_RACE_UNTIL] = until
        self.array[H_RACE_HOLD] = float(hold)

    def hold_back(self, slot: int, hold: int, stop: Callable[[], bool]) -> Boost | None:
        """A worker about to claim while hold ``hold`` keeps claims back: wait for the hold to end
        (:meth:`wait_gate`), then line up with the others let go (:meth:`line_up`).

        It waits on a core of its own and ahead of ordinary processes where allowed
        (:func:`takeover.run.wake.boost`), from before it sleeps: woken, it then runs at once, where a
        worker that only asked for that once awake would first wait its turn behind everything else
        on a loaded machine (tens of milliseconds). The caller undoes it (:meth:`Boost.undo`) once
        its claim returned.
        """
        boosted = boost(slot)
        self.array[self._base(slot) + RACE_CORE] = float(boosted.core if boosted else -1)
        try:
            self.wait_gate(hold, stop)
            self.line_up(slot, hold, boosted)
        except BaseException:
            if boosted:
                boosted.undo()
            raise
        return boosted

    def line_up(self, slot: int, hold: int, boosted: Boost | None = None) -> None:
        """A worker let go from ``hold``: if the hold asked for a race, wait for a partner, then leave.

        Why: a futex wakes every held worker at the same instant, but on a loaded machine with fewer
        cores than workers they are not all *running* at that instant, and a claim lasts a fraction of a
        millisecond: one that runs a millisecond after the other finds the row taken and no race
        happens. So each racer spins, publishing when it last looked (RACE_BEAT), until another racer
        of this hold is spinning at the same moment (on another core) or has just left; then both
        leave within microseconds of each other. Nobody left to pair with (every other racer has gone)
        or the hold's deadline passed: it leaves alone. Two racers that run later together pair up
        too: more chances for the race. Without a race asked, this returns at once.

        ``boosted``: how :meth:`hold_back` moved the racer; it moves on to the core of its rank. A
        racer at a real-time priority still alone after SHARE_AFTER yields its core after every look
        to the other real-time processes waiting there. Real-time racers of the same priority never
        preempt each other: without it, racers of two runs on one machine (the detection bench runs
        two at once) that line up at the same moment each keep a core spinning, and each waits in vain
        for a partner queued behind the other run's racer.
        """
        a = self.array
        if int(a[H_RACE_HOLD]) != hold or hold <= 0:
            return
        workers, until = int(a[H_RACE_WORKERS]), a[H_RACE_UNTIL]
        me = self._base(slot)
        others = [self._base(s) for s in range(self.slots) if s != slot]
        if boosted is not None:
            a[me + RACE_CORE] = float(boosted.move(int(a[me + RACE_RANK])))
        self._spin(me, others, hold, workers, until, bool(boosted and boosted.realtime))

    def _spin(self, me: int, others: list[int], hold: int, workers: int, until: float, share: bool) -> None:
        """line_up's loop. Racers pair by handshake: each offers itself (RACE_WITH) to a racer it sees
        running on another core, and both leave once each has offered itself to the other; one that
        sees its partner gone with it follows at once. A racer that saw a partner run once, but was
        not seen back (the partner was preempted just then), does not leave alone."""
        a = self.array
        core = a[me + RACE_CORE]
        a[me + RACE_WITH] = 0.0
        a[me + RACE_BEAT] = 0.0
        a[me + RACE] = float(hold)
        started = time.time()
        while True:
            now = time.time()
            a[me + RACE_BEAT] = now
            waiting = arrived = 0
            paired = False
            for b in others:
                race = a[b + RACE]
                if race != hold and race != -hold:
                    continue
                arrived += 1
                if race == -hold:
                    if a[b + RACE_WITH] == me:
                        paired = True  # it left with this one: follow at once
                        break
                    continue
                waiting += 1
                # A racer on this core that looked a moment ago was switched out for this one: not a partner.
                if now - a[b + RACE_BEAT] < PARTNER_FRESH and (core < 0 or a[b + RACE_CORE] != core):
                    a[me + RACE_WITH] = b
                    if a[b + RACE_WITH] == me:
                        paired = True
                        break
            if paired or now > until or (arrived + 1 >= workers and waiting == 0):
                break
            if share and now - started > SHARE_AFTER:
                os.sched_yield()
        a[me + RACE_BEAT] = time.time()
        a[me + RACE] = float(-hold)

    def left_line(self, hold: int, slots: list[int]) -> dict[int, float]:
        """When each of ``slots`` let go from ``hold`` left the line-up, for those that have."""
        a = self.array
        return {s: a[self._base(s) + RACE_BEAT] for s in slots if int(a[self._base(s) + RACE]) == -hold}

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

    def slot_index(self, slot: int, index: int) -> int:
        """Where one of a slot's fields lives in :attr:`array` (for a reader on a hot path)."""
        return self._base(slot) + index

    def field(self, slot: int, index: int) -> float:
        """One of a slot's fields by its index (FREEZE_ARM ...), for the faults that keep their own fields."""
        return float(self.array[self._base(slot) + index])

    def set_field(self, slot: int, index: int, value: float) -> None:
        self.array[self._base(slot) + index] = value

    def count(self, slot: int, counter: int) -> None:
        """Only the slot's live worker increments its counters: no lost updates without a lock."""
        self.array[self._base(slot) + counter] += 1.0

    def finish_calls(self, slot: int) -> int:
        return int(self.array[self._base(slot) + FINISH_CALLS])

    def ask_heartbeat(self, slot: int) -> None:
        """The nemesis: ask the slot's (frozen) worker to call extend() once at its next step."""
        self.array[self._base(slot) + BEAT_ASK] = 1.0

    def heartbeat_asked(self, slot: int) -> bool:
        """The slot's worker: whether a heartbeat is asked of it; the asking is taken back at once
        (only the worker writes the field to 0, only a frozen worker's is set to 1)."""
        i = self._base(slot) + BEAT_ASK
        if self.array[i] == 0.0:
            return False
        self.array[i] = 0.0
        return True

    def ask_lost_reply(self, slot: int) -> None:
        """The nemesis: the slot's worker is to lose the reply of its next action."""
        self.array[self._base(slot) + LOSE_ASK] = 1.0

    def lost_reply_asked(self, slot: int) -> bool:
        """The slot's worker: whether its next action is to lose its reply; the asking is taken back."""
        i = self._base(slot) + LOSE_ASK
        if self.array[i] == 0.0:
            return False
        self.array[i] = 0.0
        return True

    def withdraw_heartbeat(self, slot: int) -> None:
        """The nemesis: a heartbeat asked and not taken is no longer asked (the window ended)."""
        self.array[self._base(slot) + BEAT_ASK] = 0.0

    def extend_calls(self, slot: int) -> int:
        return int(self.array[self._base(slot) + EXTEND_CALLS])

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
