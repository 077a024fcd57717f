"""What ``takeover explore``'s state machine and its rules of several calls share: one judged step, the
example's failure, the recorder of one explore, the judging of one call by the spec's model, and the
weighted draw.

Why a module of its own: the machine (:mod:`takeover._internal.explorer.machine`) is built from rules of one call
and rules of several (:mod:`takeover._internal.explorer.drive`, :mod:`takeover._internal.explorer.overlap`, mixed into
it); both kinds judge a call the same way and draw by weight the same way, so that lives below all three and
none imports another back.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from hypothesis import strategies as st

from takeover._internal.explorer.coverage import Coverage
from takeover._internal.replay.model import (
    SPEC,
    STATE_MATCHES,
    TaskState,
    apply,
    claim_departures,
    claimable_tasks,
    expect,
    snapshot_departures,
    step_departures,
)
from takeover._internal.scenario.engine import Replay, StepHung
from takeover._internal.scenario.results import StepResult
from takeover.contract import QueueFactory

TICK = 1 / 1024  # the smallest step of the clock: "within a tick of the lease's end"
ACTORS = ("A", "B", "C")
# How often each kind of call is drawn, among those that can be made (extend and resolve only on a
# queue that has them; finish, extend and resolve once a task is registered). Two more kinds of step make several
# calls: an overlap (two calls at once: explore.overlap) and a drive (tasks driven to a state: explore.drive).
WEIGHTS = {"register": 14, "claim": 22, "finish": 30, "extend": 16, "resolve": 8, "reopen": 3}
T = TypeVar("T")


@dataclass
class Step:
    """One step as explore ran it: the scenario step, the queue's answer and the model's, in words."""

    spec: dict[str, Any]
    answered: str
    expected: str
    task: str | None  # the task it acted on (a claim: the one it got; None: none, or every one)
    invariants: tuple[str, ...] = ()
    what: str = ""


@dataclass
class Failure:
    """A departure: the steps up to and including the one that departed."""

    steps: list[Step]
    invariants: tuple[str, ...]
    what: str
    tasks: int  # tasks the example registered


@dataclass
class Recorder:
    """What the machines of one explore share: the budget, the counts, the departures seen (the last
    is the shrunk one: Hypothesis runs the minimal example last), and the cells reached."""

    seconds: float | None
    start: float = field(default_factory=time.monotonic)
    examples: int = 0
    steps: int = 0
    failure: Failure | None = None
    failures_seen: int = 0
    first_failure: tuple[float, int, int] | None = None  # seconds, examples and steps when the first departed
    shrink_examples: int = 0  # examples run after the first departure (Hypothesis shrinking it)
    shrink_budget: int = 0  # then at most this many: the rest pass at once, and the best so far stands
    pace: deque[float] = field(default_factory=lambda: deque(maxlen=64))  # the last calls' seconds (overlap)
    flaky_batches: int = 0  # batches Hypothesis stopped because an overlap's order changed the draws (core)

    def record(self, failure: Failure) -> None:
        """Keep the shortest departure (Hypothesis runs the shrunk example last; when the shrink
        budget cuts it short, the shortest seen so far is the one it had reached)."""
        if self.failure is None or len(failure.steps) <= len(self.failure.steps):
            self.failure = failure

    def shrinking_over(self) -> bool:
        return self.failure is not None and self.shrink_examples >= self.shrink_budget
    coverage: Coverage = field(default_factory=Coverage)
    # The open example's queue and folder: closed by its teardown, or by close_open() when Ctrl-C (or any
    # error Hypothesis does not catch) left the example without one.
    open_stack: contextlib.ExitStack | None = None

    def close_open(self) -> None:
        stack, self.open_stack = self.open_stack, None
        if stack is not None:
            stack.close()

    def spent(self) -> bool:
        return self.seconds is not None and time.monotonic() - self.start >= self.seconds


@dataclass(frozen=True)
class Setup:
    queue_spec: str
    factory: QueueFactory
    lease: float
    step_timeout: float
    recorder: Recorder
    statements: dict[str, int] = field(default_factory=dict)  # the most statements each call issued (overlap)

    @property
    def overlaps(self) -> bool:
        return bool(self.statements)


class MachineParts:
    """What a rule of several calls uses of the machine it is mixed into (ExploreMachine defines each):
    the example's clock, tasks, model and holdings, its steps, and judging one call."""

    setup: Setup
    t: float
    tasks: list[str]
    states: dict[str, TaskState]
    holdings: list[tuple[str, str, int]]  # (actor, task, generation) of every claim granted
    steps: list[Step]
    live: Replay
    overlaps: Counter[str]

    def _do(self, spec: dict[str, Any]) -> None:
        raise NotImplementedError

    def _can(self, kind: str) -> bool:
        raise NotImplementedError

    def settle(self, step: Step, before: dict[str, TaskState]) -> None:
        raise NotImplementedError


def _t(value: float | None) -> str:
    return "none" if value is None else f"{value:g}"


def claim_words(got: Any) -> str:
    if got is None:
        return "None"
    task, generation, lease_until = got
    return f"task {task}, generation {generation}, lease until t={_t(lease_until)}"


def judge_call(states: dict[str, TaskState], spec: dict[str, Any], result: StepResult, hang: StepHung | None,
               lease: float) -> tuple[str, list[str], str, str | None, tuple[str, str, int] | None]:
    """One call's answer judged by the model in ``states`` (moved on by it, in place): the answer in words,
    the invariants it breaks and why, the task it acted on, and the holding a claim granted."""
    obs, kind, task = result.observed, spec["step"], spec.get("task")
    held = None
    if hang is not None or obs.get("raised") is not None:
        answered = f"raised {'; '.join(result.errors)}" if hang is None else str(hang)
        return answered, [SPEC], f"{kind} {answered}", task, None
    if kind == "claim":
        got = obs.get("claimed")
        names, words = claim_departures(states, spec, got, lease)
        if got is not None and got[0] in states:
            task = got[0]
            states[task] = apply(states[task], spec, (got[1], got[2]))
            held = (spec["actor"], task, got[1])
        return claim_words(got), names, words, task, held
    if task is not None:
        before = states.get(task, TaskState())
        answer = obs.get("returns")
        names, words = step_departures(before, spec, answer, lease)
        states[task] = apply(before, spec, answer)
        return "nothing" if kind == "register" else repr(answer), names, words, task, None
    return "nothing", [], "", task, None


def snapshot_check(states: dict[str, TaskState], result: StepResult) -> tuple[list[str], str]:
    """A snapshot (read after the call) that does not show what the answers imply, or a contract error
    the call made (a claim's lease end is judged by the model instead)."""
    snap = snapshot_departures(states, result.observed.get("rows", []))
    if snap:
        return [STATE_MATCHES], snap
    errors = [e for e in result.errors if not e.startswith("claim returned lease_until")]
    return ([SPEC], "; ".join(errors)) if errors else ([], "")


def expected_words(states: dict[str, TaskState], spec: dict[str, Any], lease: float) -> str:
    """What the spec's model answers to ``spec`` given ``states``, in words (a claim: every right answer)."""
    kind, task = spec["step"], spec.get("task")
    if kind == "claim":
        open_ = claimable_tasks(states, float(spec["t"]))
        return ("None (nothing claimable)" if not open_ else
                " or ".join(claim_words((k, (states[k].generation or 0) + 1,
                                          float(spec["t"]) + float(spec.get("lease", lease)))) for k in open_))
    if task is not None and kind in ("finish", "extend", "resolve"):
        return repr(expect(states.get(task, TaskState()), spec, lease))
    return "nothing"


def weighted(data: st.DataObject, options: Sequence[T], weights: Sequence[int], label: str) -> T:
    """One of ``options``, each as likely as its weight (one integer draw: Hypothesis shrinks it toward
    the first option)."""
    pick = data.draw(st.integers(0, sum(weights) - 1), label=label)
    for option, w in zip(options, weights, strict=True):
        pick -= w
        if pick < 0:
            return option
    return options[-1]
