"""Aimed faults: steer real processes into the spec's narrow windows, and say whether they got there.

Why scripts and not random draws: the bugs that matter most live in windows a few milliseconds
wide. A finish that ignores the lease is only exposed when a holder calls finish after its lease ran
out *and* before anyone took the task over; a finish that ignores the generation only when the stale
holder's finish lands while a new holder's lease is valid. Random kills and pauses line these up
now and then, so a subtle one-line bug escapes a short run by luck. Each aimed fault below is a
short script that builds its window on purpose, with SIGSTOP/SIGCONT on the real workers and the
claim gate of the phase board (:meth:`PhaseBoard.close_gate`), and then records whether the window
was really reached: ``hit``, or ``missed`` with the reason. What happened inside the window is the
history's to tell and the checker's to judge; the script never looks at the queue's answers.

This module is the frame every kind's script runs in (:class:`AimedFaults`: arrivals, windows, the
claim gate, freezing and resuming, the tally) and the building blocks the scripts share. Each kind is
an :class:`AimedKind` in a module of its own, named after it, handed in by the nemesis
(takeover._internal.run.nemesis.AIMED_KINDS):

- ``expire_and_return`` (S2, the lease boundary): :mod:`takeover._internal.run.expire_and_return`;
- ``stale_return`` (S3): :mod:`takeover._internal.run.stale_return`;
- ``claim_stampede`` (claim atomicity): :mod:`takeover._internal.run.claim_stampede`;
- ``duplicate_register`` (producer retries): :mod:`takeover._internal.run.duplicate_register`;
- ``stale_heartbeat``, ``lease_edge`` and ``freeze_in_call``: the modules of those names.

Each script is a generator driven by the nemesis' loop: it yields how long it may sleep and never
blocks, so kills, pauses and the other scripts go on meanwhile. Its ``finally`` puts everything
back (frozen workers resumed, the gate opened) whenever it ends, also when the faults stop.
"""

from __future__ import annotations

import random
import time
from collections import deque
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from takeover._internal.config import RunConfig
from takeover._internal.run.phases import HOLDING, PhaseBoard, SlotView
from takeover._internal.run.tally import AimTally

# A script yields the seconds it may sleep before its next step.
Script = Generator[float, None, None]
# A kind's script kept in a module of its own: called with the AimedFaults, the window's deadline, its fields.
ScriptOf = Callable[["AimedFaults", float, dict[str, Any]], Script]

WINDOW = 3.0  # how long an aimed fault may look for its target or wait for the gate
STARTUP_WAIT = 5.0  # windows wait this long at most for every worker to come up
STARTUP_POLL = 0.005
TAKEOVER_GRACE = 0.2  # how long past a stale_return holder's lease end the gated holds keep off the gate
POLL = 0.0005  # watching the board for a phase that lasts milliseconds
GATE_WAIT = 1.0  # how long the claims in flight may take to return once the gate is closed
GATHER = 0.6  # how long a hold waits for the other workers to reach the gate (claims are held meanwhile)
RACE_SPIN = 0.1  # how long workers let go together wait for a partner to start with (PhaseBoard.line_up)
# How long before its frozen holder's lease ends expire_and_return closes the claim gate. Until then the
# other workers claim and finish as usual: no claim can take a task whose lease is still valid (a queue
# that hands it out anyway is caught for that), and a gate held for the whole lease stopped every claim
# for a second: a run's first seconds then had no finish at all, and stale_return's takeovers waited.
CLOSE_AHEAD = 0.15
FEW_FREE = "too few free workers"  # why a hold waits (see AimedFaults._gate_blocker)
# The orders a stale_return window lets its two holders finish in, dealt from a seeded deck: the stale
# holder first, while the new one still holds the task (S3: a finish that ignores the generation
# commits over the new holder), or the new holder first, its finish seen through, and the stale one
# after it (a finish of a task that is done already: a queue that answers True to it has two finishes
# counted). One window cannot do both, and each planted bug needs its own order early in a short run,
# so the two orders are two lanes: a window of each may be open at the same time (one per order).
STALE_ORDERS = ("stale_first", "new_first")
# Kinds whose first arrivals come at the very start of the faulted phase, so their windows open as soon
# as the workers are up: stale_return holds no claims back (the gated kinds' first arrivals stay spread
# over the first second, so they do not all queue for the gate at once), and each of its windows waits
# a whole lease for its takeover, which is most of the time to the first stale finish.
OPEN_AT_ONCE = frozenset({"stale_return", "stale_heartbeat"})


def early_arrivals(kind: str) -> int:
    """How many of a kind's first arrivals the nemesis plans inside the faulted phase's first second:
    one per order its windows take, so each order is tried early."""
    return len(STALE_ORDERS) if kind == "stale_return" else 1


class Missed(Exception):
    """The window was not reached; the message says why, in words a user can act on."""


@dataclass
class Frozen:
    """A worker an aimed fault froze on purpose (recorded as a pause of the fault's kind)."""

    slot: int
    view: SlotView
    token: Any  # what the nemesis' ``thaw`` needs to resume it and record the pause's end
    thawed: bool = False


class Producer(Protocol):
    """The coordinator's side of registration, for duplicate_register and claim_stampede; what the
    open queue can do (its optional methods, takeover.contract.capabilities), for the kinds that need one;
    and, for aim_unreached, the cells the history has reached so far, the snapshot's rows and the
    coordinator's own recorded calls (:meth:`ask`: a finish, extend or resolve of a task at a generation)."""

    def register_again(self, ids: Sequence[str]) -> int: ...
    def register_new(self) -> str | None: ...
    def states(self) -> list[tuple[str, str]] | None: ...
    def capabilities(self) -> dict[str, bool]: ...
    def reached(self) -> set[str]: ...
    def rows(self) -> list[tuple[str, str, int, float | None]] | None: ...
    def ask(self, op: str, task: str, gen: int) -> bool | float | None: ...


@dataclass(frozen=True)
class AimedKind:
    """An aimed fault kind written in a module of its own: its script, run in :meth:`AimedFaults._run`'s
    frame as the methods here are (``script(faults, deadline, fields)``); whether it applies to the open
    queue (a kind that needs an optional method is not tried on a queue without it: no window, no miss);
    and whether its hold ends with a frozen holder's lease, as expire_and_return's does (the other holds
    then keep off the gate before it closes: :meth:`AimedFaults._gate_blocker`)."""

    script: ScriptOf
    applies: Callable[[AimedFaults], bool] = lambda _faults: True
    ends_with_lease: bool = False


class Hands(Protocol):
    """What the scripts do to processes: the nemesis lends its effectors."""

    def candidates(self, phases: Iterable[str] | None = None) -> list[int]: ...
    def probe(self, slot: int) -> SlotView | None: ...
    def release(self, slot: int) -> None: ...
    def freeze(self, slot: int, view: SlotView, kind: str, planned: float) -> Any: ...
    def thaw(self, token: Any) -> None: ...
    def record(self, type_: str, kind: str, **fields: Any) -> None: ...


class AimedFaults:
    """Runs the aimed fault scripts; one at a time per kind, and one at a time behind the gate."""

    GATED = ("expire_and_return", "claim_stampede", "duplicate_register")

    def __init__(self, cfg: RunConfig, board: PhaseBoard, hands: Hands, producer: Producer | None,
                 rngs: dict[str, random.Random], kinds: Mapping[str, AimedKind] | None = None) -> None:  # fmt: skip
        self.cfg = cfg
        self.kinds = dict(kinds or {})  # each kind's script, by name (takeover._internal.run.nemesis.AIMED_KINDS)
        # The holds that end with a frozen holder's lease (see AimedKind.ends_with_lease).
        self.lease_holds = {k for k, v in self.kinds.items() if v.ends_with_lease}
        self.board = board
        self.hands = hands
        self._producer = producer
        self.rngs = rngs
        self.tally = AimTally()
        # A window's lane is (kind, order): stale_return's order (dealt when it arrives), else "".
        self.active: dict[tuple[str, str], tuple[Script, float]] = {}  # lane -> (script, when it may run next)
        self.waiting: dict[tuple[str, str], deque[float]] = {}  # lane -> arrivals not started yet
        self.reserved: set[int] = set()  # slots an aimed fault froze: no other fault may touch them
        self.gate_owner: str | None = None
        self.holds = 0
        self._deck: list[str] = []
        self._decks: dict[str, list[str]] = {}  # see deal
        self._orders: list[str] = []
        self._up = False
        # Per stale_return order under way: its frozen holder's lease end and task, until the takeover.
        self._takeovers: dict[str, tuple[float, int]] = {}
        self._closing_at: float | None = None  # when an expire_and_return closes the gate again (CLOSE_AHEAD)
        self._closing_kind = "expire_and_return"  # the kind (a lease hold) that closes it then
        self._first_tick: float | None = None
        self._up_at = 0.0  # when the workers were up (see _workers_up)
        self._released_at = 0.0  # when the last hold let its held workers go
        self._stampedes = 0  # claim_stampede windows so far: every other one races on an expiring task
        # aim_unreached's (takeover._internal.run.aim_unreached): its seeded order of cells, how many windows aimed at
        # each, and how many never-registered task ids it has called on.
        self.cell_plan: list[str] | None = None
        self.cells_tried: dict[str, int] = {}
        self.absent_calls = 0

    # -- driven by the nemesis --------------------------------------------------------------------
    def arrive(self, kind: str, now: float) -> None:
        """Queue an arrival in its lane: stale_return's next order from the deck, so the run's first two
        arrivals take one order each and open together."""
        if kind in self.kinds and not self.kinds[kind].applies(self):
            self.tally.skipped[kind] += 1  # e.g. a heartbeat fault on a queue without extend(): nothing to try
            return
        order = self._next_order() if kind == "stale_return" else ""
        self.waiting.setdefault((kind, order), deque()).append(now)

    def tick(self, now: float) -> float:
        """Start what arrived, advance what is due; the time until the next step.

        Nothing starts before the workers are up (:meth:`_workers_up`): a window opened while they
        are still starting finds no holder and no one at the gate, and ends missed having tested
        nothing (under load the workers take a second or two to come up).
        """
        if not self._workers_up(now):
            return STARTUP_POLL
        for lane, queue in self.waiting.items():
            if queue and lane not in self.active:
                arrived = max(queue.popleft(), self._up_at)
                self.active[lane] = (self._run(*lane, arrived), now)
        wait = 1.0
        for lane, (script, due) in list(self.active.items()):
            if time.time() >= due:
                try:
                    step = next(script)
                except StopIteration:
                    del self.active[lane]
                    continue
                due = time.time() + step
                self.active[lane] = (script, due)
            wait = min(wait, due - time.time())
        if any(self.waiting.values()):
            wait = min(wait, POLL)
        return max(0.0, wait)

    def _workers_up(self, now: float) -> bool:
        """Two workers (every one, if fewer) have published a phase once, or STARTUP_WAIT passed since
        the first tick. Two: every window needs one holder, and the gated ones two workers at the
        gate; waiting for the last of them would cost a run's slowest start-up."""
        if self._up:
            return True
        if self._first_tick is None:
            self._first_tick = now
        started = sum(1 for s in range(self.board.slots) if self.board.read(s).since > 0)
        self._up = started >= min(2, self.board.slots) or now - self._first_tick > STARTUP_WAIT
        self._up_at = now
        return self._up

    def guards(self, slot: int) -> bool:
        """Whether ``slot`` holds a task a stale_return waits to see taken over: the nemesis' own
        kills and pauses leave it alone (a kill_before_action or a pause that takes the new holder in
        the millisecond after its claim, before the window freezes it, wastes the window)."""
        return bool(self._takeovers) and self.board.read(slot).task in {t for _, t in self._takeovers.values()}

    @property
    def busy(self) -> bool:
        return bool(self.active)

    def stop(self) -> None:
        """The faulted phase ends: every script ends now (its ``finally`` resumes and reopens)."""
        for lane, (script, _due) in list(self.active.items()):
            script.close()
            del self.active[lane]
        self.waiting.clear()

    def cut_short(self, reason: str) -> None:
        """End every script under way now, as missed for ``reason`` (its ``finally`` puts things back);
        arrivals not started yet start later, with the workers there are then."""
        for lane, (script, _due) in list(self.active.items()):
            try:
                script.throw(Missed(reason))
            except (StopIteration, Missed):
                pass
            else:
                script.close()
            del self.active[lane]

    # -- the frame every script runs in -----------------------------------------------------------------
    def _run(self, kind: str, order: str, arrived: float) -> Script:
        """One window of ``kind``: WINDOW from its arrival, or from when the workers came up if it
        arrived before (a window that waited for the one before it gets what is left: arrivals
        that queued up must not then hold the gate back to back). A stale_return window's ``order``
        is on its invoke and its ok: two windows of the kind may be open at once, one per order, and
        the reader pairs each ok with the invoke of its order (docs/history.md)."""
        fields: dict[str, Any] = {"order": order} if order else {}
        self.hands.record("invoke", kind, **fields)
        try:
            yield from self.kinds[kind].script(self, arrived + WINDOW, fields)
        except Missed as exc:
            self._end(kind, False, str(exc), fields)
        except GeneratorExit:
            self._end(kind, False, "the faulted phase ended first", fields)
            raise
        else:
            self._end(kind, True, fields.pop("detail", ""), fields)

    def _end(self, kind: str, hit: bool, detail: str, fields: dict[str, Any]) -> None:
        (self.tally.hits if hit else self.tally.missed)[kind] += 1
        if not hit:
            self.tally.reasons[(kind, detail)] += 1
        # The reason travels in ``value`` ("missed: ..."), a column the checker reads anyway. A script may
        # have written its hit's detail into ``fields`` before it missed or was cut short (stale_heartbeat
        # does once the heartbeat returned): the miss's reason replaces it, never goes beside it.
        fields = {k: v for k, v in fields.items() if k != "detail"}
        self.hands.record("ok", kind, value="hit" if hit else f"missed: {detail}", detail=detail, **fields)

    # -- building blocks ----------------------------------------------------------------------------
    def _holder_phases(self) -> tuple[str, ...]:
        """Between the action and finish (``acted``): once resumed, the holder calls finish at once.
        Without a local step that phase is too short to catch, so then a working holder is taken."""
        return ("acted",) if self.cfg.local_step >= 0.005 else ("working",)

    def _freeze_holder(self, kind: str, deadline: float, fields: dict[str, Any], gated: bool = False,
                       past_lease: float = 0.0, spare: int = 0,
                       phases: tuple[str, ...] | None = None) -> Generator[float, None, Frozen]:  # fmt: skip
        """Find a lease holder in the aimed phase and freeze it there (recorded as a pause of ``kind``).

        ``gated``: the fault needs the claim gate as soon as it has its holder, so it looks only while
        no other aimed fault owns the gate, and takes the gate (closed) in the same step as the freeze.
        Owning the gate while it hunts would keep the other gated faults waiting for seconds.
        ``past_lease``: how long past the lease's end the fault means to resume it (the pause's plan).
        ``spare``: how many live workers nobody froze must be left besides the holder (its takeovers).
        ``phases``: where to find it (default :meth:`_holder_phases`).
        """
        phases = phases or self._holder_phases()
        pick = self.rngs["targets"]
        blocked_by = ""  # why it did not look, the last time it could not: the start of its miss
        while True:
            if gated and self.gate_owner is not None:
                blocked_by = f"claims were held by {self.gate_owner}"
            elif spare and self._idle_workers() <= spare:
                blocked_by = f"fewer than {spare + 1} workers were free (not frozen)"
            else:
                slots = [s for s in self.hands.candidates(phases) if s not in self.reserved]
                pick.shuffle(slots)
                for slot in slots:
                    view = self.hands.probe(slot)
                    if view is None:
                        continue
                    if view.phase in phases and view.lease_until > time.time() + 0.005:
                        if gated:
                            self._own_gate(kind, close=True)
                        return self._freeze(slot, view, kind, view.lease_until + past_lease - time.time())
                    self.hands.release(slot)
            if time.time() > deadline:
                if blocked_by:
                    raise Missed(f"{blocked_by} or no lease holder was in phase {'/'.join(phases)} for {WINDOW:g} s")
                raise Missed(f"no lease holder was in phase {'/'.join(phases)} within {WINDOW:g} s")
            yield POLL

    def _freeze(self, slot: int, view: SlotView, kind: str, planned: float) -> Frozen:
        self.reserved.add(slot)
        return Frozen(slot, view, self.hands.freeze(slot, view, kind, planned))

    def _thaw(self, frozen: Frozen | None) -> None:
        """Resume it once (a later call, from a ``finally``, does nothing)."""
        if frozen is not None and not frozen.thawed:
            frozen.thawed = True
            self.reserved.discard(frozen.slot)
            self.hands.thaw(frozen.token)

    def _resume_to_finish(self, frozen: Frozen, end: float, missed: str) -> Generator[float, None, None]:
        """Resume a frozen holder and see the finish its window set up through (:meth:`_see_finish`)."""
        calls = self.board.finish_calls(frozen.slot)
        self._thaw(frozen)
        yield from self._see_finish(frozen.slot, frozen.view.process, calls, end, missed)

    def _see_finish(self, slot: int, process: int, calls: int, end: float, missed: str) -> Generator[float, None, None]:
        """Wait until the holder in ``slot`` has called finish (its count of finish calls moved past
        ``calls``) and the call has returned and been recorded. The slot stays reserved meanwhile, so
        no kill or pause cuts into it (a kill inside it leaves the finish's outcome unknown and the
        window wasted). Missed with ``missed`` if the holder has not called finish by ``end``."""
        self.reserved.add(slot)
        try:
            while True:
                called = self.board.finish_calls(slot) != calls
                if called and self.board.phase(slot) not in ("finishing", "finished"):  # its completion is written
                    return
                if self.board.read(slot).process != process or (not called and time.time() > end):
                    raise Missed(missed)
                if time.time() > end + 1.0:
                    return  # called, and still inside it a second later: the window was reached anyway
                yield POLL
        finally:
            self.reserved.discard(slot)

    def _take_gate(self, kind: str, deadline: float) -> Generator[float, None, int]:
        """Wait until no other aimed fault holds the claims back, then close the gate; the hold's number."""
        while (blocker := self._gate_blocker(kind)) is not None:
            if time.time() > deadline:
                if blocker == self.gate_owner:
                    raise Missed(f"claims stayed held by {blocker} for {WINDOW:g} s")
                if blocker == FEW_FREE:
                    raise Missed(f"fewer than two workers were free (not frozen) for {WINDOW:g} s")
                raise Missed(f"the claim gate was left to {blocker} for {WINDOW:g} s")
            yield 0.005
        return self._own_gate(kind, close=True)

    def _gate_blocker(self, kind: str) -> str | None:
        """Who keeps ``kind`` from closing the gate now: its owner; or, for the holds that do not
        end with a lease (claim_stampede, duplicate_register), a stale_return (of either order) whose
        frozen holder's lease ends within a hold's length (GATHER): its takeover needs claims to run then,
        and a hold then would delay it by the whole hold (once TAKEOVER_GRACE has passed without a
        takeover, the holds go on: a window that waits longer must not starve them). Or, for those
        holds, FEW_FREE while fewer than two workers are free (not frozen by a fault): a hold needs two
        at the gate, and one begun then ends missed having tested nothing (at a run's start both
        stale_return orders and an expire_and_return may have three of four workers frozen). Else None."""
        if self.gate_owner is not None:
            return self.gate_owner
        if kind in self.lease_holds:
            return None
        now = time.time()
        if any(-TAKEOVER_GRACE < due - now < GATHER + 0.1 for due, _task in self._takeovers.values()):
            return "stale_return"
        if self._closing_at is not None and self._closing_at - now < GATHER + 0.1:
            return self._closing_kind  # it closes the gate soon: a hold begun now would still own it then
        if self._idle_workers() < 2:
            return FEW_FREE
        return None

    def _own_gate(self, kind: str, close: bool) -> int:
        self.gate_owner = kind
        self.holds += 1
        if close:
            self.board.close_gate(self.holds)
        return self.holds

    def _open_gate(self, kind: str) -> None:
        """Open the gate (closed or not) and give it up, if ``kind`` owns it."""
        if self.gate_owner == kind:
            self.board.open_gate()
            self.gate_owner = None

    def _claims_settled(self, exclude: set[int]) -> Generator[float, None, None]:
        """With the gate closed, wait until no claim is still in flight (a worker inside claim)."""
        end = time.time() + GATE_WAIT
        while any(self.board.phase(s) == "claiming" for s in self.hands.candidates() if s not in exclude):
            if time.time() > end:
                raise Missed(f"a claim was still running {GATE_WAIT:g} s after claims were held back")
            yield POLL

    def _gather(self, want: int) -> Generator[float, None, list[int]]:
        """With the gate closed, wait for up to ``want`` workers to reach it; at least two, or Missed."""
        patience = GATHER
        end = time.time() + patience
        while True:
            held = [s for s in self.hands.candidates(("held",)) if s not in self.reserved]
            if len(held) >= want or time.time() > end:
                break
            yield 0.002
        if len(held) < 2:
            raise Missed(f"only {len(held)} worker(s) reached the claim gate within {patience:g} s")
        return held

    def _let_go_together(self, hold: int, held: list[int]) -> list[int]:
        """Open the gate for the workers still held: one wake-up reaches them all at the same instant
        (:meth:`PhaseBoard.open_gate`), and they line up in pairs that start at the same microsecond
        (:meth:`PhaseBoard.line_up`), so their calls race. No signal: a worker waits at the gate
        before its call, holding nothing, and stopping and resuming them one by one is what spread
        their starts over milliseconds on a loaded machine."""
        released = [s for s in held if self.board.phase(s) == "held"]
        self.board.race(hold, released, time.time() + RACE_SPIN)
        self._released_at = time.time()
        self.board.open_gate()
        return released

    def _left_the_gate(self, released: list[int]) -> Generator[float, None, None]:
        """Keep the gate until the released workers have left it: a hold closed again before one of
        them ran would keep it for the next hold, hundreds of milliseconds after the others. The
        nemesis sleeps through the racers' line-up first: polling then takes a core from them."""
        yield RACE_SPIN
        end = time.time() + 0.2
        while time.time() < end and any(self.board.phase(s) == "held" for s in released):
            yield POLL

    # -- the scripts ----------------------------------------------------------------------------------
    def _reopen_until_expiry(self, kind: str, lease_until: float) -> Generator[float, None, None]:
        """With the holder frozen, open the claim gate until CLOSE_AHEAD before its lease ends, then
        take it again (the other gated holds keep off it from a hold's length before: _gate_blocker).
        Missed if another hold still owns it when the lease ends: a claim could then take the task over
        before the holder's return."""
        close_at = lease_until - CLOSE_AHEAD
        if close_at - time.time() < 2 * POLL:
            return  # its lease ends now: keep the gate it took with the freeze
        self._closing_at, self._closing_kind = close_at, kind
        self._open_gate(kind)
        try:
            while time.time() < close_at:
                yield close_at - time.time()
            while (blocker := self._gate_blocker(kind)) is not None:
                if time.time() >= lease_until:
                    raise Missed(f"claims were held by {blocker} when the frozen holder's lease ran out")
                yield POLL
            self._own_gate(kind, close=True)
        finally:
            self._closing_at = None

    @property
    def producer(self) -> Producer:
        if self._producer is None:
            raise Missed("this nemesis has no producer to register tasks with")
        return self._producer

    # -- what the scripts look at -------------------------------------------------------------------
    def _idle_workers(self) -> int:
        """How many workers a hold waits for: every live one nobody froze (held or on its way)."""
        return sum(1 for s in self.hands.candidates() if s not in self.reserved)

    def _holder_of(self, task: int, gen: int, exclude: int) -> int | None:
        for slot in self.hands.candidates(HOLDING):
            if slot == exclude or slot in self.reserved:
                continue
            v = self.board.read(slot)
            if v.task == task and v.gen > gen:
                return slot
        return None

    def deal(self, name: str, cards: Sequence[str]) -> str:
        """The next card of the deck ``name``: each round holds every card once, shuffled by the stream
        ``rngs[name]``, so a short run sees every card and the seed alone decides the order."""
        deck = self._decks.setdefault(name, [])
        if not deck:
            deck.extend(cards)
            self.rngs[name].shuffle(deck)
        return deck.pop()

    def _next_order(self) -> str:
        """The next stale_return window's order, from a deck holding each order once per round."""
        if not self._orders:
            self._orders = list(STALE_ORDERS)
            self.rngs["orders"].shuffle(self._orders)
        return self._orders.pop()
