"""Run a sequence of steps against a queue in this process and judge its answers by the spec's model.

Why through the scenario engine (``takeover._internal.scenario.replay.run_scenario``): the replay and the scenario
file it writes must be the same experiment. Both open a fresh SQLite file, make every call on one
deadlined thread, and read the queue's own ``snapshot()`` after each step; a scenario that departs
from the spec in the replay departs in ``takeover scenarios --file`` too.

Why judge with the model rather than run the checker over the replayed answers: a replay is one
process with no indeterminate call, so every rule the checker applies collapses to "this answer is
the one a correct queue gives after everything the queue answered so far", which is what
:func:`takeover._internal.replay.model.step_departures` computes; the model also names the invariant a wrong
answer breaks. It is stricter than the checker in one way, on purpose: the snapshot is compared after
every step, not only at the end, so a snapshot that lies is caught on the step that makes it lie.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from takeover._internal.replay.model import (
    LEASE_TOLERANCE,
    STATE_MATCHES,
    TaskState,
    apply,
    returns,
    snapshot_departure,
    step_departures,
)
from takeover._internal.scenario.engine import DEFAULT_STEP_TIMEOUT
from takeover._internal.scenario.overlap import group_at
from takeover._internal.scenario.replay import run_scenario
from takeover._internal.scenario.results import ReplayedScenario
from takeover._internal.scenario.results import StepResult as ScenarioStep
from takeover.contract import QueueFactory


@dataclass(frozen=True)
class Departure:
    index: int  # 1-based step number
    invariants: tuple[str, ...]
    what: str


@dataclass(frozen=True)
class Outcome:
    """What one replay showed: the departures, and a signature of every answer (for "the answers
    stayed the same" while the shrinker rounds the clock)."""

    departures: tuple[Departure, ...]
    signature: tuple[Any, ...]
    answers: tuple[Any, ...]  # the queue's answers, step by step (a claim's generation; None if it raised)
    hung: str | None = None

    def invariants(self) -> set[str]:
        return {name for d in self.departures for name in d.invariants}

    def breaks(self, invariant: str) -> bool:
        return any(invariant in d.invariants for d in self.departures)

    def first(self, invariant: str) -> Departure | None:
        return next((d for d in self.departures if invariant in d.invariants), None)


def scenario_of(task: str, lease: float, steps: list[dict[str, Any]], sid: str = "replay",
                title: str = "replay") -> dict[str, Any]:
    return {"id": sid, "title": title, "task": task, "lease_seconds": lease, "steps": steps}


def _answer(step: dict[str, Any], observed: dict[str, Any]) -> Any:
    """The queue's full answer as the model takes it (a claim: generation and lease_until)."""
    if step["step"] == "claim":
        got = observed.get("claimed")
        return None if got is None else (got[1], got[2])
    return observed.get("returns")


def judge(result: ReplayedScenario, lease: float) -> Outcome:
    """Walk the replayed steps with the model, fed the queue's own answers. Two calls at once (a paused
    step, the step in its gap, the resume: takeover._internal.scenario.overlap) are read in the order that fits the
    model, or when none does, in the one that went further (ties: the order they returned in)."""
    s = TaskState()
    read = _Read()
    steps = result.steps
    n = 0
    while n < len(steps) and not steps[n].skipped:
        if group_at(steps, n) and not any(st.skipped for st in steps[n:n + 3]):
            paused, gap, resume = steps[n:n + 3]
            orders = [[paused, gap, resume], [gap, paused, resume]] if paused.observed.get("overlapped") else \
                [[paused, gap, resume]]
            if paused.observed.get("gap_first"):
                orders.reverse()
            readings = []
            for order in orders:
                r = _Read()
                after = s
                for st in order:
                    after = r.step(after, st, lease, snapshot=st is resume)
                readings.append((len(r.departures) == 0, r.first_index(), after, r))
            ok, _first, s, best = max(readings, key=lambda x: (x[0], x[1]))
            # Said at the resume, where both calls are done: a scenario cut before it no longer overlaps.
            best.departures = [Departure(resume.index, d.invariants, d.what) for d in best.departures]
            read.extend(best, in_order=[paused, gap, resume])
            n += 3
            continue
        s = read.step(s, steps[n], lease)
        n += 1
    hung = result.hung.error if result.hung is not None else None
    return Outcome(tuple(sorted(read.departures, key=lambda d: d.index)), tuple(read.signature),
                   tuple(read.answers), hung)


class _Read:
    """The departures, signature and answers of steps walked with the model."""

    def __init__(self) -> None:
        self.departures: list[Departure] = []
        self.signature: list[Any] = []
        self.answers: list[Any] = []
        self._by_step: dict[int, tuple[Any, Any]] = {}

    def first_index(self) -> int:
        """How far the reading got: the departure's position (later is better), or past every step."""
        return min((self._position[d.index] for d in self.departures), default=len(self._position))

    @property
    def _position(self) -> dict[int, int]:
        return {index: n for n, index in enumerate(self._by_step)}

    def extend(self, other: _Read, in_order: list[ScenarioStep]) -> None:
        """Another reading's results, written in the order the steps stand in the scenario."""
        self.departures += other.departures
        for st in in_order:
            sig, answer = other._by_step[st.index]
            self.signature.append(sig)
            self.answers.append(answer)

    def step(self, s: TaskState, step: ScenarioStep, lease: float, snapshot: bool = True) -> TaskState:
        spec, obs = step.spec, step.observed
        raised = obs.get("raised")
        if raised is not None or step.hung:
            what = "; ".join(step.errors) or str(raised)
            self.departures.append(Departure(step.index, ("spec",), f"{spec['step']} raised {what}"))
            self._keep(step, (spec["step"], "raised"), None)
            return s
        answer = _answer(spec, obs)
        names, words = step_departures(s, spec, answer, lease)
        s = apply(s, spec, answer)
        snap = snapshot_departure(s, obs) if snapshot and "pause_before_statement" not in spec else ""
        if snap:
            names = [*names, STATE_MATCHES]
            words = f"{words}; {snap}" if words else snap
        if names:
            self.departures.append(Departure(step.index, tuple(dict.fromkeys(names)), words))
        shown = returns(spec["step"], answer)
        lease_ok = answer is None or spec["step"] != "claim" or math.isclose(
            answer[1], float(spec["t"]) + float(spec.get("lease", lease)), rel_tol=0.0, abs_tol=LEASE_TOLERANCE)
        self._keep(step, (spec["step"], shown if not isinstance(shown, float) else "lease", lease_ok,
                          obs.get("state"), obs.get("generation"), obs.get("lease_until") is None,
                          tuple(sorted(set(names)))), shown)
        return s

    def _keep(self, step: ScenarioStep, sig: Any, answer: Any) -> None:
        self._by_step[step.index] = (sig, answer)
        self.signature.append(sig)
        self.answers.append(answer)


class ReplayHung(Exception):
    """A queue call did not return within the step timeout: the replay stops there (the call may
    still be running, and every further sequence would likely wait out the same deadline)."""


class Replayer:
    """Runs scenarios of one task against one queue, remembering each answer: the shrinker asks
    about the same sequence more than once, and the queue is deterministic in one process."""

    def __init__(self, queue_spec: str, factory: QueueFactory, step_timeout: float = DEFAULT_STEP_TIMEOUT) -> None:
        self.queue_spec = queue_spec
        self.factory = factory
        self.step_timeout = step_timeout
        self.runs = 0  # replays actually run (not answered from memory)
        self._memo: dict[str, Outcome] = {}
        self._repeats: dict[str, list[Outcome]] = {}

    def run(self, task: str, lease: float, steps: list[dict[str, Any]]) -> Outcome:
        key = json.dumps([task, lease, steps], sort_keys=True, default=str)
        got = self._memo.get(key)
        if got is None:
            got = self.fresh(task, lease, steps)
            self._memo[key] = got
        return got

    def repeated(self, task: str, lease: float, steps: list[dict[str, Any]], times: int) -> list[Outcome]:
        """``times`` real replays of one sequence (each on a fresh file), made once per sequence."""
        key = json.dumps([task, lease, steps, times], sort_keys=True, default=str)
        if key not in self._repeats:
            self._repeats[key] = [self.fresh(task, lease, steps) for _ in range(times)]
        return self._repeats[key]

    def fresh(self, task: str, lease: float, steps: list[dict[str, Any]]) -> Outcome:
        """A real replay, never from memory (what the determinism check repeats)."""
        self.runs += 1
        result = run_scenario(scenario_of(task, lease, steps), self.queue_spec, self.factory, lease,
                              self.step_timeout)
        outcome = judge(result, lease)
        if outcome.hung is not None:
            raise ReplayHung(outcome.hung)
        return outcome
