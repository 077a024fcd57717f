"""The nemesis: which fault, when, and at whom — kills (random and aimed at a phase) and pauses.

Why a stratified plan per kind, each from its own seeded stream: a kind with rate r gets one
arrival at a uniformly random instant in each consecutive 1/r-second slot, so a run of D seconds
sees about r*D of them — never the zero that a Poisson draw gives a short run now and then, so a
requested fault is always exercised — and a kind's schedule does not shift when another kind's
rate changes. Every choice comes from ``--seed``. What a
run cannot make deterministic is the interleaving of real processes; the history records what
actually happened, including where each kill really landed (the phase the dead process left on
the board), so nothing rests on what the nemesis intended.

Aimed kills *hunt*: when one is due, the nemesis watches the board (every ~0.2 ms) for a worker
in the aimed phase. On sight it freezes the worker (SIGSTOP, waiting until the kernel reports it
stopped) and reads the board again: if the worker is still in the phase, the SIGKILL
lands exactly there — for ``during_finish`` at a random instruction inside the finish call, before
or after its commit; if it has moved on, it is resumed at once (a freeze of some microseconds,
counted as a ``probe_miss``) and the hunt goes on. A hunt that finds no target within
``HUNT_WINDOW`` seconds (or two of its kind's slots, if longer) is counted as expired.

Pauses go to a lease holder and last a time chosen against its remaining lease:
``before_expiry`` (resumed while the lease is still valid), ``just_after_expiry`` (2-20 ms past
it: the moment a stale finish is most likely to slip through, before anyone reclaims) or
``long_after_expiry`` (one to two leases past it). The three classes
are dealt from shuffled decks so a short run still sees all three. With ``--pause-time-file`` each pause is
instead a ``stall`` as long as one of the given durations (GC or VM stalls), drawn from the pause stream.

Aimed faults (``expire_and_return``, ``stale_return``, ``claim_stampede``, ``duplicate_register``,
``freeze_in_call``, ``stale_heartbeat``, ``lease_edge``) arrive on the same stratified plan and are
handed to :mod:`takeover._internal.run.aimed`, which steers the workers into their window; the slots they freeze
are theirs alone until they let go (no kill or pause may touch them).

Clock jumps (``--clock-jump-rate``) arrive on the same stratified plan, from their own stream: each
steps a live worker's clock by a seeded amount, posted on the phase board for the worker to apply and
record (:mod:`takeover._internal.run.clock`).

Worker-drawn faults (lost replies, slow tasks) are not the nemesis' business: the worker draws
them with its own seeded stream and records them itself.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from takeover._internal.config import AIM_PHASES, KILL_AIMS, RunConfig
from takeover._internal.options import AIMED_FAULTS, NEMESIS_FAULTS
from takeover._internal.run.aim_unreached import AIM_UNREACHED
from takeover._internal.run.aimed import OPEN_AT_ONCE, AimedFaults, AimedKind, Producer, early_arrivals
from takeover._internal.run.claim_stampede import CLAIM_STAMPEDE
from takeover._internal.run.duplicate_register import DUPLICATE_REGISTER
from takeover._internal.run.expire_and_return import EXPIRE_AND_RETURN
from takeover._internal.run.freeze_in_call import KIND, FreezeInCall
from takeover._internal.run.lease_edge import LEASE_EDGE
from takeover._internal.run.phases import PhaseBoard, SlotView
from takeover._internal.run.stale_heartbeat import STALE_HEARTBEAT
from takeover._internal.run.stale_return import STALE_RETURN
from takeover._internal.run.tally import Tally
from takeover._internal.seeds import stream_seed

HUNT_WINDOW = 3.0
FIRST_AIM = 1.0  # an aimed kind's first window opens within this many seconds of the faulted phase
HUNT_POLL = 0.0002  # a finish call lasts a fraction of a millisecond
PAUSE_CLASSES = ("before_expiry", "just_after_expiry", "long_after_expiry")
PAUSE_PHASES = ("working", "acting", "acted")  # holders not inside a database call
JUST_AFTER_MARGIN = (0.002, 0.02)
# Every aimed kind's script, each in a module of its own (takeover._internal.run.aimed.AimedKind); freeze_in_call's
# is made per run (it keeps state of the run's config), below.
AIMED_KINDS: dict[str, AimedKind] = {"expire_and_return": EXPIRE_AND_RETURN, "stale_return": STALE_RETURN,
                                     "claim_stampede": CLAIM_STAMPEDE, "duplicate_register": DUPLICATE_REGISTER,
                                     "stale_heartbeat": STALE_HEARTBEAT, "lease_edge": LEASE_EDGE,
                                     "aim_unreached": AIM_UNREACHED}
CLOCK_JUMP = "clock_jump"  # the plan's name for clock jumps, and their history ``f`` (takeover._internal.run.clock)


def draw_ms(rng: random.Random, largest: float) -> float:
    """Uniform in ``[-largest, +largest]``, in whole milliseconds.

    A clock's skew or jump (takeover._internal.run.clock)."""
    return round(rng.uniform(-largest, largest), 3) if largest > 0 else 0.0


@dataclass
class Pause:
    slot: int
    process: int
    klass: str
    planned: float
    started: float
    resume_at: float
    view: SlotView


@dataclass
class Hunt:
    kind: str
    aim: str
    phases: tuple[str, ...]
    deadline: float


class Nemesis:
    """Driven by the coordinator's loop through :meth:`tick`; never sleeps itself."""

    def __init__(
        self,
        cfg: RunConfig,
        board: PhaseBoard,
        *,
        live_slots: Callable[[], list[int]],
        probe: Callable[[int], SlotView | None],
        release: Callable[[int], None],
        kill: Callable[[int, str, SlotView], str],
        pause: Callable[[int, Pause], None],
        resume: Callable[[Pause], None],
        record: Callable[..., None] | None = None,
        producer: Producer | None = None,
    ) -> None:
        self.cfg = cfg
        self.board = board
        self._live_slots = live_slots
        self._probe = probe
        self._release = release
        self._kill = kill
        self._pause = pause
        self._resume = resume
        self.rngs = {k: random.Random(stream_seed(cfg.seed, k)) for k in (*NEMESIS_FAULTS, CLOCK_JUMP)}
        self.pick = random.Random(stream_seed(cfg.seed, "targets"))  # hunts: draws vary with the interleaving
        # Random kills choose from their own stream, one fixed-size draw per arrival, so which slot the
        # n-th random kill prefers depends on --seed alone, never on how many probes the hunts made.
        self.pick_random = random.Random(stream_seed(cfg.seed, "random_targets"))
        self.next_at: dict[str, float] = {}
        self._slot_no: dict[str, int] = {}
        self._t0 = 0.0
        self.hunts: list[Hunt] = []
        self.paused: dict[int, Pause] = {}
        self.tally = Tally()
        self._deck: list[str] = []
        self.active = False
        self._record = record or (lambda *_args, **_fields: None)
        streams = {k: self.rngs[k] for k in AIMED_FAULTS} | {"targets": random.Random(stream_seed(cfg.seed, "aim")),
                                                             "orders": random.Random(stream_seed(cfg.seed, "orders"))}
        kinds = AIMED_KINDS | {KIND: AimedKind(FreezeInCall(cfg).script)}
        self.aimed = AimedFaults(cfg, board, _Hands(self), producer, streams, kinds)
        self.tally.aimed = self.aimed.tally

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self, now: float) -> None:
        self.active = True
        self._t0 = now
        for kind in (*NEMESIS_FAULTS, CLOCK_JUMP):
            if self._rate(kind) > 0:
                self._slot_no[kind] = 0
                self.next_at[kind] = self._plan(kind)

    def _rate(self, kind: str) -> float:
        """Arrivals per second of a kind the nemesis plans (clock jumps are not a kind of ``faults``)."""
        return self.cfg.clock_jump_rate if kind == CLOCK_JUMP else self.cfg.faults.get(kind, 0.0)

    def _plan(self, kind: str) -> float:
        """The next arrival: a uniform instant inside the kind's next 1/rate-second slot.

        An aimed fault's first arrival falls in the first FIRST_AIM seconds instead (when its slot is
        longer): each of them sets up one window on purpose, and a short CI run should reach every
        window early rather than, at 0.2/s, half of them after 2.5 s. A kind whose windows take turns
        between orders (stale_return) has its first arrival of each order there, and those of a kind
        that holds no claims back (:data:`OPEN_AT_ONCE`) come at the phase's start, to open as the
        workers come up. The later arrivals keep their slots, so the kind's count over a run stays
        rate x duration (and the stream's draws are the same either way).
        """
        i = self._slot_no[kind]
        self._slot_no[kind] = i + 1
        slot = 1.0 / self._rate(kind)
        if kind in AIMED_FAULTS and i < early_arrivals(kind):
            spread = 0.0 if kind in OPEN_AT_ONCE else min(slot, FIRST_AIM)
            return self._t0 + self.rngs[kind].random() * spread
        return self._t0 + (i + self.rngs[kind].random()) * slot

    def stop(self) -> None:
        """Faults stop: no new ones, hunts called off, every paused worker resumed now."""
        self.active = False
        self.next_at.clear()
        self.hunts.clear()
        self.aimed.stop()
        for pause in list(self.paused.values()):
            self._resume(pause)
        self.paused.clear()

    def power_lost(self) -> None:
        """Every worker died at a power loss (takeover._internal.run.power): the aimed faults under way end as
        missed, and every pause ends with its worker (recorded as a pause whose end is unknown)."""
        self.aimed.cut_short("a power loss killed the workers first")
        for pause in list(self.paused.values()):
            self._resume(pause)
        self.paused.clear()

    def is_paused(self, slot: int) -> bool:
        return slot in self.paused

    # -- the loop ---------------------------------------------------------------------------------
    def tick(self, now: float) -> float:
        """Do what is due; return how long the caller may sleep before the next tick."""
        self.resume_due(now)
        if not self.active:
            return self._until_resume(now)
        for kind, due in list(self.next_at.items()):
            if now >= due:
                self.next_at[kind] = self._plan(kind)
                self._arrive(kind, now)
                self.resume_due(time.time())  # a kill or a probe took time: a pause may be due by now
        self.hunts = [h for h in self.hunts if not self._hunt(h, now)]
        aimed_wait = self.aimed.tick(time.time())
        if self.hunts:
            return HUNT_POLL
        wait = min([t - now for t in self.next_at.values()] + [self._until_resume(now), aimed_wait])
        return max(0.0, wait)

    def resume_due(self, now: float) -> None:
        """Resume every pause whose time has come. Called between any two pieces of work that take
        time, because a pause resumed late is a pause of the wrong class (just_after_expiry is 2-20 ms
        past the lease: a few ms of delay make it long_after_expiry in effect)."""
        for slot, pause in list(self.paused.items()):
            if now >= pause.resume_at:
                del self.paused[slot]
                self._resume(pause)

    def next_resume(self) -> float | None:
        """When the next paused worker is due to be resumed, if any."""
        return min((p.resume_at for p in self.paused.values()), default=None)

    def _until_resume(self, now: float) -> float:
        return min([p.resume_at - now for p in self.paused.values()] + [0.05])

    def _arrive(self, kind: str, now: float) -> None:
        if kind in AIMED_FAULTS:
            self.aimed.arrive(kind, now)
            return
        if kind == CLOCK_JUMP:
            self._jump()
            return
        if kind == "kill":
            order = list(range(self.board.slots))
            self.pick_random.shuffle(order)
            candidates = set(self._candidates())
            for slot in (s for s in order if s in candidates):
                view = self._probe(slot)
                if view is not None:
                    self._do_kill(slot, "random", view)
                    return
            self.tally.hunts_expired[kind] += 1
            return
        deadline = now + max(HUNT_WINDOW, 2.0 / self.cfg.faults[kind])
        if kind == "pause":
            self.hunts.append(Hunt(kind, "pause", PAUSE_PHASES, deadline))
        else:
            aim = KILL_AIMS[kind]
            self.hunts.append(Hunt(kind, aim, AIM_PHASES[aim], deadline))

    def _jump(self) -> None:
        """Step one live worker's clock: the slot (first live one of a seeded shuffle) and the size come
        from the kind's own stream, fixed-size draws per arrival, so they depend on --seed alone."""
        rng = self.rngs[CLOCK_JUMP]
        order = list(range(self.board.slots))
        rng.shuffle(order)
        step = draw_ms(rng, self.cfg.clock_jump_max)
        live = set(self._live_slots())
        for slot in order:
            if slot in live and step:
                self.board.post_clock_jump(slot, step)
                self.tally.clock_jumps += 1
                return

    def _candidates(self, phases: tuple[str, ...] | None = None, aimed: bool = False) -> list[int]:
        """Live workers no fault holds; for the nemesis' own kills and pauses (not ``aimed``) also
        none that holds the task a stale_return waits to see taken over (:meth:`AimedFaults.guards`)."""
        board = self.board
        return [
            s
            for s in self._live_slots()
            if s not in self.paused and s not in self.aimed.reserved and (phases is None or board.phase(s) in phases)
            and (aimed or not self.aimed.guards(s))
        ]

    def _hunt(self, hunt: Hunt, now: float) -> bool:
        """One look at the board; True when the hunt is over (fired or expired)."""
        slots = self._candidates(hunt.phases)
        self.pick.shuffle(slots)
        for slot in slots:
            view = self._probe(slot)
            if view is None:
                continue
            self.resume_due(time.time())
            if view.phase in hunt.phases and (hunt.kind != "pause" or view.lease_until > time.time() + 0.005):
                if hunt.kind == "pause":
                    self._do_pause(slot, view, now)
                else:
                    self._do_kill(slot, hunt.aim, view)
                return True
            self._release(slot)
            self.tally.probe_misses[hunt.kind] += 1
        if now >= hunt.deadline:
            self.tally.hunts_expired[hunt.kind] += 1
            return True
        return False

    def _do_kill(self, slot: int, aim: str, view: SlotView) -> None:
        phase_at_death = self._kill(slot, aim, view)
        self.tally.kills[aim] += 1
        self.tally.kill_phases[(aim, phase_at_death)] += 1
        if aim == "random" or phase_at_death in AIM_PHASES[aim]:
            self.tally.kill_hits[aim] += 1

    def _next_class(self) -> str:
        if not self._deck:
            self._deck = list(PAUSE_CLASSES)
            self.rngs["pause"].shuffle(self._deck)
        return self._deck.pop()

    def plan_pause_length(self, klass: str, remaining: float) -> float:
        rng, lease = self.rngs["pause"], self.cfg.lease
        if klass == "before_expiry":
            return max(0.001, remaining * rng.uniform(0.3, 0.8))
        if klass == "just_after_expiry":
            return remaining + rng.uniform(*JUST_AFTER_MARGIN)
        return remaining + lease * rng.uniform(1.0, 2.0)

    def _do_pause(self, slot: int, view: SlotView, now: float) -> None:
        """The holder is already frozen by the probe: plan the length against its remaining lease."""
        started = time.time()  # not the tick's ``now``: the probe took time, and the plan is relative
        remaining = view.lease_until - started
        if self.cfg.pause_time_samples:  # observed stalls (--pause-time-file): their own length, whatever the lease
            klass, planned = "stall", self.rngs["pause"].choice(self.cfg.pause_time_samples)
        else:
            klass = self._next_class()
            planned = self.plan_pause_length(klass, remaining)
        pause = Pause(slot, view.process, klass, planned, started, started + planned, view)
        self._pause(slot, pause)
        self.paused[slot] = pause
        self.tally.pauses[klass] += 1


class _Hands:
    """The nemesis' effectors as the aimed faults use them: a frozen holder is recorded as a pause
    whose ``detail`` names the aimed fault, so reports and the checker see it as the freeze it is."""

    def __init__(self, nemesis: Nemesis) -> None:
        self.n = nemesis

    def candidates(self, phases: Iterable[str] | None = None) -> list[int]:
        return self.n._candidates(tuple(phases) if phases is not None else None, aimed=True)

    def probe(self, slot: int) -> SlotView | None:
        return self.n._probe(slot)

    def release(self, slot: int) -> None:
        self.n._release(slot)

    def freeze(self, slot: int, view: SlotView, kind: str, planned: float) -> Pause:
        started = time.time()
        pause = Pause(slot, view.process, kind, planned, started, float("inf"), view)
        self.n._pause(slot, pause)
        return pause

    def thaw(self, token: Pause) -> None:
        self.n._resume(token)

    def record(self, type_: str, kind: str, **fields: Any) -> None:
        self.n._record(type_, kind, **fields)
