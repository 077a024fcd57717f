"""The claim gate and the race at it: how an aimed fault holds every claim back and lets some go together.

Why apart from the phases: the phases are what each worker publishes about itself; the gate is what the
nemesis tells all of them at once (the board's header) and how the workers it lets go find each other
(the slot's race fields). The offsets come from takeover._internal.run.board_layout.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from takeover._internal.run.board_layout import (
    H_GATE,
    H_RACE_HOLD,
    H_RACE_UNTIL,
    H_RACE_WORKERS,
    H_REGISTER_HOLD,
    H_REGISTER_TASK,
    RACE,
    RACE_BEAT,
    RACE_CORE,
    RACE_RANK,
    RACE_WITH,
    BoardMemory,
)
from takeover._internal.run.wake import Boost, boost

# How the racers of a hold find each other: a racer of that hold on another core that has looked within
# PARTNER_FRESH is running at this very moment (line_up).
PARTNER_FRESH = 0.00005
# A real-time racer still alone after this long yields its core between looks (line_up's ``boosted``):
# before, its looks come a few microseconds apart, and so does its leaving after its partner's.
SHARE_AFTER = 0.001
GATE_WAIT_STEP = 0.1  # a held worker wakes at least this often to notice a stop or its parent's death


class GateBoard(BoardMemory):
    """The board's claim gate, the race of the workers a hold lets go, and the registration it asks."""

    def close_gate(self, hold: int) -> None:
        """Hold every claim back: a worker about to claim waits (phase ``held``) until the gate opens.

        Why a gate and not a freeze: a worker frozen inside a claim may hold the database's write
        lock, and the one worker an aimed fault lets go on would then block behind it. A worker
        waits at the gate only before it enters the claim, so nothing is held while it waits.
        """
        self.array[H_GATE] = float(hold)

    def open_gate(self) -> None:
        """Let every held worker go at once: one futex wake-up reaches them all (takeover._internal.run.wake)."""
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
        (:func:`takeover._internal.run.wake.boost`), from before it sleeps: woken, it then runs at once, where a
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
