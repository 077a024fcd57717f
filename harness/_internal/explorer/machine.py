"""The state machine ``takeover explore`` runs: random contract calls on one live queue, each answer
judged at once by the spec's model.

Why Hypothesis's stateful testing: the bugs a user writes into a queue sit behind short, particular
sequences (finish uncertain, then register again; a takeover, then the old holder's heartbeat; a
finish a few milliseconds past the lease), and a random sequence that hits one is long and full of
noise. Hypothesis generates the sequences, and when one departs from the spec it shrinks it to the
fewest steps, actors, tasks and smallest times that still depart, which is the sequence a person can
read at a glance and the scenario file a fix is tested against.

Why the scenario engine (:func:`takeover._internal.scenario.engine.live_queue`) makes the calls: every call goes
through the deadlined caller thread the scenarios use, on a fresh database of the command's host
(SQLite file or PostgreSQL database), with the queue's own ``snapshot()`` read after every step, so
what explore finds, ``takeover scenarios --file`` reruns as the same experiment.

Why the model of :mod:`takeover._internal.replay.model`: it is the spec's contract as a function of the answers
so far (one :class:`TaskState` per task here); a claim may hand out *any* claimable task. The step
is judged against what a correct queue answers given everything this queue answered before, so the
departure is named by the invariant it breaks.

Where the draws lean: the situations the spec's promises turn on. Times land on a lease's end
(``lease_until`` minus one tick, at it, one tick past, and an eighth to three eighths of a second
past, where a skew-tolerant finish still says yes), finishes and heartbeats come from the current
holder, a stale holder after a takeover, a former holder whose lease ran out with no takeover, and
generations never handed out; registers hit tasks in every state; the queue is closed and reopened on
the same database. Every time is a multiple of 1/1024 s, exact in binary floating point, so
``now + lease`` compares the same in the queue, the database and the model.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

from takeover._internal.coverage_space import classify
from takeover._internal.explorer.calls import (
    ACTORS,
    TICK,
    WEIGHTS,
    Failure,
    Setup,
    Step,
    expected_words,
    judge_call,
    snapshot_check,
    weighted,
)
from takeover._internal.explorer.coverage import step_cell
from takeover._internal.explorer.drive import DriveRules
from takeover._internal.explorer.overlap import OverlapRules
from takeover._internal.replay.model import TaskState
from takeover._internal.scenario.engine import StepHung, live_queue
from takeover._internal.scenario.results import StepResult
from takeover.contract import has_extension

PAST = (TICK, 1 / 8, 1 / 4, 3 / 8)  # how far past a lease's end a boundary time lands
# Drawn first, apart from the kinds (a draw of its own, so the calls' weights above keep their meaning): a step
# of two calls at once, or a drive, in about these many steps out of MACRO_OUT_OF.
MACROS = {"overlap": 4, "drive": 3}
MACRO_OUT_OF = 32
# A resolve changes a task only when the task is uncertain and the generation is the task's own: that one
# call is where a wrong state written, a wrong answer after a change, or every uncertain task of the
# generation resolved at once show, so resolve is drawn this much more often while a task is uncertain, and
# its (task, generation) leans that way: the task's generation or one either side, and an uncertain task's
# own generation this much more than any other pair.
RESOLVE_WHILE_UNCERTAIN = 5
RESOLVE_ACCEPTED = 6
CALLER_WEIGHTS = (6, 3, 1)  # the latest holder of a task, a stale one, never a holder
CALLERS = (("holder", "expired"), ("stale",), ("never",))  # their cells' callers (takeover._internal.coverage_space)
MAX_TASKS = 6
TASK_COUNTS = (1, 2, 1, 3, 2, 1, 4, 2, 6)  # tasks an example holds: mostly one to three, sometimes more
START = 0.0


class Departed(AssertionError):
    """A step whose answer (or snapshot) is not the spec's: what Hypothesis shrinks."""


class ExploreMachine(DriveRules, OverlapRules, RuleBasedStateMachine):
    """One example: a fresh queue, a few tasks, three actors, the logical clock from 0. Its rules of one call
    are here; its rules of several calls (a drive, two calls at once) are mixed in from their modules."""

    setup: Setup  # set by machine_class

    def __init__(self) -> None:
        rec = self.setup.recorder
        super().__init__()
        self.idle = rec.shrinking_over()
        if self.idle:  # the shrink budget is spent: this candidate passes without a call
            return
        if rec.failure is not None:
            rec.shrink_examples += 1
        rec.examples += 1
        self.t = START
        self.tasks: list[str] = []
        self.states: dict[str, TaskState] = {}
        self.holdings: list[tuple[str, str, int]] = []  # (actor, task, generation) of every claim granted
        self.steps: list[Step] = []
        rec.close_open()  # a previous example Hypothesis gave up without its teardown
        self._stack = contextlib.ExitStack()
        rec.open_stack = self._stack
        self.live = self._stack.enter_context(live_queue(
            "explore", self.setup.queue_spec, self.setup.factory, self.setup.lease, self.setup.step_timeout,
            task=self._name(0), tasks=tuple(self._name(i) for i in range(1, MAX_TASKS))))
        try:
            self.live.open()
        except StepHung as hung:
            self._stack.close()
            raise Departed(f"opening the queue: {hung}") from None
        self.can_extend = has_extension(self.live.queue, "extend")
        self.can_resolve = has_extension(self.live.queue, "resolve")
        self.can_batch = has_extension(self.live.queue, "register_many")
        rec.coverage.set_extensions(e for e, has in (("extend", self.can_extend), ("resolve", self.can_resolve))
                                    if has)
        self.cells: Counter[str] = Counter()
        self.overlaps: Counter[str] = Counter()  # the overlap situations reached (explore.overlap.situation)

    @staticmethod
    def _name(i: int) -> str:
        return f"t{i + 1}"

    def teardown(self) -> None:
        if not self.idle:
            self.setup.recorder.open_stack = None
            self._stack.close()
            self.setup.recorder.coverage.merge(self.cells, self.overlaps)

    # -- the clock ------------------------------------------------------------------------------------------
    def _boundaries(self, leases: list[float]) -> list[float]:
        out = []
        for end in sorted(set(leases)):
            out += [end - TICK, end, *(end + p for p in PAST)]
        return [b for b in out if b >= self.t]

    def _when(self, data: st.DataObject, leases: list[float]) -> float:
        """The next step's time: the same instant (most often: a holder acts inside its lease), a
        little later, much later, or on one of ``leases``' ends."""
        bounds = self._boundaries(leases)
        mode = data.draw(st.integers(0, 19 if bounds else 10), label="when")
        if mode <= 7:
            return self.t
        if mode <= 9:
            return self.t + data.draw(st.sampled_from((TICK, 1 / 8)), label="a little later by")
        if mode <= 10:
            return self.t + data.draw(st.sampled_from((1 / 2, 1.0, 4.0)), label="later by")
        return data.draw(st.sampled_from(bounds), label="at a lease's end")

    def _running_leases(self) -> list[float]:
        return [s.lease_until for s in self.states.values() if s.state == "running" and s.lease_until is not None]

    # -- doing and judging one step -------------------------------------------------------------------------
    def _do(self, spec: dict[str, Any]) -> None:
        spec = {"t": self.t, "actor": spec.pop("actor", None), **spec}
        rec = self.setup.recorder
        rec.steps += 1
        lease = self.setup.lease
        states_before = dict(self.states)
        expected = expected_words(self.states, spec, lease)
        result = StepResult(index=len(self.steps) + 1, spec=spec)
        started = time.monotonic()
        hang = self.live.run_step(result)
        rec.pace.append(time.monotonic() - started)
        answered, names, words, task, held = judge_call(self.states, spec, result, hang, lease)
        if held is not None:
            self.holdings.append(held)
        if not names and hang is None:
            names, words = snapshot_check(self.states, result)
        self.settle(Step(spec, answered, expected, task, tuple(dict.fromkeys(names)), words), states_before)

    def settle(self, step: Step, before: dict[str, TaskState]) -> None:
        """Keep a judged step, count its cells, and end the example with the departure when it departed."""
        self.steps.append(step)
        self._classify(step, before)
        if step.invariants:
            rec = self.setup.recorder
            rec.failures_seen += 1
            if rec.first_failure is None:
                rec.first_failure = (time.monotonic() - rec.start, rec.examples, rec.steps)
            rec.record(Failure(list(self.steps), step.invariants, step.what, len(self.tasks)))
            raise Departed(f"step {len(self.steps)}: {step.what}")

    def _classify(self, step: Step, before: dict[str, TaskState]) -> None:
        """Count the coverage cells this step reached (takeover._internal.coverage_space), from the model just
        before it, and the snapshot's cells of every registered task after it."""
        spec = step.spec
        kind = spec["step"]
        if kind == "claim":
            actor = spec["actor"]
            mine = [(k, g) for a, k, g in self.holdings[:-1] if a == actor] if step.task else \
                [(k, g) for a, k, g in self.holdings if a == actor]
            task = step.task or (mine[-1][0] if mine else next(iter(sorted(before)), None))
            held = max((g for k, g in mine if k == task), default=None)
        else:
            task, held = spec.get("task"), spec.get("with_generation")
        if task is not None:
            cell = step_cell(spec, before.get(task, TaskState()), held, TICK)
            if cell is not None:
                self.cells[cell] += 1
        now = float(spec["t"])
        for s in self.states.values():
            if s.state is not None:
                self.cells[classify("snapshot", s.state, "never", now, s.lease_until, TICK)] += 1

    # -- the rules ------------------------------------------------------------------------------------------
    @initialize(n=st.sampled_from(TASK_COUNTS))
    def choose_tasks(self, n: int) -> None:
        self.tasks = [self._name(i) for i in range(n)]

    @rule(data=st.data())
    def step(self, data: st.DataObject) -> None:
        """One call, its kind drawn by weight (:data:`WEIGHTS`) among those that can be made: one rule
        rather than one per kind, because Hypothesis picks rules evenly (and turns some off for a whole
        example), which starved the finishes behind the claims and reopens."""
        if self.idle:
            return
        # No macro first: Hypothesis shrinks a draw toward its first option, so a macro shrinks to plain calls.
        macro = weighted(data, (None, *MACROS), (MACRO_OUT_OF - sum(MACROS.values()), *MACROS.values()), "macro")
        if macro is not None and self._can(macro):  # steps of several calls: the mixed-in rules
            (self.overlap_step if macro == "overlap" else self.drive_step)(data)
            return
        coverage = self.setup.recorder.coverage
        kinds = [k for k in WEIGHTS if self._can(k)]
        uncertain = any(s.state == "uncertain" for s in self.states.values())
        weights = [coverage.weight(k, WEIGHTS[k], ("done", "uncertain"))
                   * (RESOLVE_WHILE_UNCERTAIN if k == "resolve" and uncertain else 1) for k in kinds]
        self._do(getattr(self, f"_{weighted(data, kinds, weights, 'kind')}")(data))

    def _can(self, kind: str) -> bool:
        if kind in ("register", "claim", "reopen", "drive"):
            return True
        if not self._registered():
            return False
        return {"extend": self.can_extend, "resolve": self.can_resolve, "overlap": self.setup.overlaps}.get(kind, True)

    def _register(self, data: st.DataObject) -> dict[str, Any]:
        """A producer registers a task: new, or again in whatever state it is in (each state present
        as likely as any other, so a register of the one uncertain task is not rare); one in four through
        the optional register_many when the queue has it (a batch of that task)."""
        by_state: dict[str | None, list[str]] = {}
        for k in self.tasks:
            by_state.setdefault(self.states.get(k, TaskState()).state, []).append(k)
        group = data.draw(st.sampled_from(sorted(by_state, key=lambda x: (x is not None, x or ""))), label="state")
        task = data.draw(st.sampled_from(by_state[group]), label="task")
        self.t = self._when(data, self._running_leases())
        if self.can_batch and weighted(data, (False, True), (3, 1), "through register_many"):
            return {"step": "register", "task": task, "batch": True}
        return {"step": "register", "task": task}

    def _claim(self, data: st.DataObject) -> dict[str, Any]:
        actor = data.draw(st.sampled_from(ACTORS), label="actor")
        self.t = self._when(data, self._running_leases())
        step: dict[str, Any] = {"actor": actor, "step": "claim"}
        lease = data.draw(st.sampled_from((self.setup.lease, self.setup.lease / 2, self.setup.lease * 2)),
                          label="lease")
        if lease != self.setup.lease:
            step["lease"] = lease
        return step

    def _generation(self, data: st.DataObject, ops: tuple[str, ...]) -> tuple[str, str, int]:
        """Who calls with which generation: the latest holder of a task (current, or former once its
        lease ran out with no takeover), a stale holder after a takeover, or a generation never
        handed out (the next one, or 0)."""
        held = sorted(set(self.holdings), key=lambda h: (h[1], -h[2], h[0]))
        latest = [h for h in held if h[2] == self.states[h[1]].generation]
        stale = [h for h in held if h not in latest]
        registered = [k for k in self.tasks if self.states.get(k, TaskState()).state is not None]
        never: list[tuple[str | None, str, int]] = [
            (None, k, g) for k in registered for g in ((self.states[k].generation or 0) + 1, 0)]
        groups = [g for g in (latest, stale, never) if g]
        coverage = self.setup.recorder.coverage
        weights = [coverage.caller_weight(ops, CALLERS[0] if g is latest else CALLERS[1] if g is stale else CALLERS[2],
                                          CALLER_WEIGHTS[0 if g is latest else 1 if g is stale else 2])
                   for g in groups]
        group = weighted(data, groups, weights, "caller")
        who, task, gen = data.draw(st.sampled_from(group), label="holder")
        actor = who if who is not None else data.draw(st.sampled_from(ACTORS), label="actor")
        return actor, task, gen

    def _own_leases(self, task: str, gen: int) -> list[float]:
        s = self.states.get(task, TaskState())
        own = [until for g, until in s.leases if g == gen]
        return own + self._running_leases()

    def _registered(self) -> bool:
        return any(s.state is not None for s in self.states.values())

    def _finish(self, data: st.DataObject) -> dict[str, Any]:
        actor, task, gen = self._generation(data, ("finish_done", "finish_uncertain"))
        outcome = data.draw(st.sampled_from(("done", "uncertain")), label="outcome")
        self.t = self._when(data, self._own_leases(task, gen))
        return {"actor": actor, "step": "finish", "task": task, "outcome": outcome, "with_generation": gen}

    def _extend(self, data: st.DataObject) -> dict[str, Any]:
        actor, task, gen = self._generation(data, ("extend",))
        self.t = self._when(data, self._own_leases(task, gen))
        step: dict[str, Any] = {"actor": actor, "step": "extend", "task": task, "with_generation": gen}
        lease = data.draw(st.sampled_from((self.setup.lease, self.setup.lease / 4, self.setup.lease * 2)),
                          label="lease")
        if lease != self.setup.lease:
            step["lease"] = lease
        return step

    def _resolve(self, data: st.DataObject) -> dict[str, Any]:
        """An operator settles a task back to pending or to done, with the task's generation or one either
        side: an uncertain task's own generation (the call that changes it) far more often than any other
        pair (:data:`RESOLVE_ACCEPTED`), and every pair leaned toward the resolve cells not reached yet
        (:meth:`Coverage.cell_weight`: on uncertain, pending, running, done; by its holder, a stale one,
        one that never held it). Both resolutions alike."""
        registered = sorted(k for k, s in self.states.items() if s.state is not None)
        pairs = [(k, g) for k in registered for g in dict.fromkeys(
            (self.states[k].generation or 0) + d for d in (0, -1, 1))]
        coverage = self.setup.recorder.coverage
        weights = []
        for k, g in pairs:
            s = self.states[k]
            accepted = s.state == "uncertain" and g == s.generation
            cell = step_cell({"step": "resolve", "t": self.t}, s, g, TICK)
            weights.append(coverage.cell_weight(cell, RESOLVE_ACCEPTED if accepted else 1))
        task, gen = weighted(data, pairs, weights, "task and generation")
        outcome = data.draw(st.sampled_from(("pending", "done")), label="outcome")
        self.t = self._when(data, self._running_leases())
        return {"step": "resolve", "task": task, "outcome": outcome, "with_generation": gen}

    def _reopen(self, data: st.DataObject) -> dict[str, Any]:
        """The queue is closed and a new queue object opened on the same database."""
        return {"step": "exit_and_reopen"}


def machine_class(setup: Setup) -> type[ExploreMachine]:
    """A machine bound to one queue and one recorder (Hypothesis builds the machine with no arguments)."""
    return type("ExploreMachine", (ExploreMachine,), {"setup": setup})
