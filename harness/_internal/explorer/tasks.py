"""A departure that needs several tasks, as a scenario file of several tasks.

Why a replay of its own: one task's steps alone break nothing when the bug is between tasks (a finish fenced
by the generation but not the task id ends every running task of that generation; a snapshot that drops a row
when two run). The whole example is replayed through the scenario engine with every task it names (a scenario's
``tasks``, each step naming its ``task``), judged by the model of several tasks explore itself uses
(:func:`~takeover._internal.explorer.machine.judge_call`), and shrunk by the replay's shrinker.

Why only claims with one claimable task: the spec lets a claim take *any* claimable task, so a file whose
claim could hand out either of two would be checked against one choice, and a correct queue choosing the other
would fail it. The example is shrunk as it is, then its registers are moved later until every claim up to the
departure has one right answer (written as the claim step's ``task``), then shrunk again where a candidate with
a claim of several right answers does not count as breaking the promise, so the file passes on every correct
queue. Two calls at once are replayed one after the other here (the departure must
stand without the overlap), and every step's expectations include the whole snapshot (``snapshot``): the
departure may show on a task the step did not name.
"""

from __future__ import annotations

import math
from typing import Any

from takeover._internal.explorer.calls import Failure, Step, expected_words, judge_call, snapshot_check
from takeover._internal.replay.judge import Departure, Outcome, Replayer, ReplayHung
from takeover._internal.replay.model import TaskState, apply, claimable_tasks, expect, lease_of, returns
from takeover._internal.replay.shrink import Shrunk, drop_default_lease, shrink
from takeover._internal.scenario.replay import run_scenario
from takeover._internal.scenario.results import ReplayedScenario
from takeover.contract import QueueFactory

Steps = list[dict[str, Any]]


def one_at_a_time(steps: Steps) -> Steps:
    """Two calls at once made one after the other: the pause dropped, the resume (which calls nothing) gone."""
    return [{k: v for k, v in st.items() if k != "pause_before_statement"} for st in steps
            if st["step"] != "resume"]


def judge_tasks(result: ReplayedScenario, lease: float, strict: bool = True) -> tuple[Outcome, list[Step], int]:
    """The replayed steps walked with the model of several tasks: the departures (``strict``: none when a claim
    before the first one had several right answers), a signature of every answer, the steps in explore's words,
    and how many claims up to the first departure had several right answers."""
    states: dict[str, TaskState] = {}
    departures: list[Departure] = []
    signature: list[Any] = []
    answers: list[Any] = []
    shown: list[Step] = []
    ambiguous = 0
    for step in result.steps:
        if step.skipped or step.hung:
            break
        spec = step.spec
        now = float(spec["t"])
        if spec["step"] == "claim" and len(claimable_tasks(states, now)) > 1 and not departures:
            ambiguous += 1
        expected = expected_words(states, spec, lease)
        answered, names, words, task, _held = judge_call(states, spec, step, None, lease)
        if not names:
            names, words = snapshot_check(states, step)
        names = list(dict.fromkeys(names))
        if names:
            departures.append(Departure(step.index, tuple(names), words))
        got = step.observed.get("claimed")
        if spec["step"] == "claim":
            answer: Any = None if got is None else (got[0], got[1], math.isclose(
                got[2], now + lease_of(spec, lease), rel_tol=0.0, abs_tol=1e-6))
        else:
            answer = step.observed.get("returns")
            answer = "lease" if isinstance(answer, float) else answer
        rows = tuple(sorted((str(r[0]), r[1], r[2], r[3] is None) for r in step.observed.get("rows", ())))
        signature.append((spec["step"], answer, rows, tuple(names)))
        answers.append(answer)
        shown.append(Step(spec, answered, expected, task, tuple(names), words))
    hung = result.hung.error if result.hung is not None else None
    kept = () if strict and ambiguous else tuple(departures)
    return Outcome(kept, tuple(signature), tuple(answers), hung), shown, ambiguous


class TasksReplayer(Replayer):
    """The replay's :class:`Replayer` for scenarios of several tasks (its ``task`` argument is not used:
    every step names its own)."""

    def __init__(self, queue_spec: str, factory: QueueFactory, step_timeout: float, tasks: list[str],
                 strict: bool = True) -> None:
        super().__init__(queue_spec, factory, step_timeout)
        self.tasks = tasks
        self.strict = strict  # a claim with several right answers before the departure: no departure

    def fresh(self, task: str, lease: float, steps: Steps) -> Outcome:
        return self.judged(lease, steps)[0]

    def judged(self, lease: float, steps: Steps) -> tuple[Outcome, list[Step], int]:
        self.runs += 1
        scenario = {"id": "explore", "title": "explore", "tasks": self.tasks, "lease_seconds": lease, "steps": steps}
        outcome, shown, ambiguous = judge_tasks(
            run_scenario(scenario, self.queue_spec, self.factory, lease, self.step_timeout), lease, self.strict)
        if outcome.hung is not None:
            raise ReplayHung(outcome.hung)
        return outcome, shown, ambiguous


def one_right_claim(replayer: TasksReplayer, lease: float, steps: Steps, invariant: str) -> Steps:
    """Registers moved later, one at a time, each to the first place where the departure stays and fewer claims
    have a choice: ``register t1, register t2, claim, claim`` becomes ``register t1, claim, register t2, claim``,
    whose claims each have one right answer (``replayer`` is not strict: it counts the claims with a choice)."""

    def choices(candidate: Steps) -> int | None:
        outcome, _shown, ambiguous = replayer.judged(lease, candidate)
        return ambiguous if outcome.breaks(invariant) else None

    best = choices(steps)
    moved = True
    while best and moved:
        moved = False
        for i, st in enumerate(steps):
            if st["step"] != "register":
                continue
            for j in range(i + 1, len(steps)):
                candidate = [*steps[:i], *steps[i + 1:j + 1], dict(st, t=steps[j]["t"]), *steps[j + 1:]]
                n = choices(candidate)
                if n is not None and n < best:
                    steps, best, moved = candidate, n, True
                    break
            if moved:
                break
    return steps


def write_tasks(queue_spec: str, factory: QueueFactory, lease: float, step_timeout: float,
                failure: Failure) -> tuple[Shrunk, list[Step], list[str]] | str:
    """The departure shrunk as a scenario of several tasks (the shrunk steps, them in explore's words, the
    tasks they name), or why there is none."""
    names = sorted({s.task for s in failure.steps if s.task} | {str(s.spec["task"]) for s in failure.steps
                                                                 if s.spec.get("task")})
    lenient = TasksReplayer(queue_spec, factory, step_timeout, names, strict=False)
    steps = drop_default_lease(one_at_a_time([s.spec for s in failure.steps]), lease)
    outcome = lenient.run("", lease, steps)
    wanted = next((inv for inv in failure.invariants if outcome.breaks(inv)), None)
    if wanted is None:
        return (f"its {len(names)} tasks' steps, replayed one call at a time, break "
                f"{', '.join(sorted(outcome.invariants())) or 'nothing'}")
    # Shrunk first as they are (fewer tasks and steps: fewer claims with a choice), then registers moved later
    # until every claim has one right answer, then shrunk again keeping that.
    loose = shrink(lenient, "", lease, steps, wanted)
    lease, steps = loose.lease, one_right_claim(lenient, loose.lease, loose.steps, wanted)
    replayer = TasksReplayer(queue_spec, factory, step_timeout, names)
    if not replayer.run("", lease, steps).breaks(wanted):
        return (f"its {len(names)} tasks' steps break {wanted} only where a claim could hand out any of several "
                "tasks, and a scenario file's claim names the one it must get")
    sh = shrink(replayer, "", lease, steps, wanted)
    outcome, shown, _ambiguous = replayer.judged(sh.lease, sh.steps)
    first = outcome.first(wanted)
    shown = shown[: first.index] if first is not None else shown
    used = sorted({str(st["task"]) for st in sh.steps if st.get("task")})
    return Shrunk("", sh.lease, sh.steps, outcome, loose.replays + sh.replays), shown, used


def expected_task_steps(steps: Steps, lease: float) -> Steps:
    """``steps`` with what a correct queue answers and shows after each (every claim has one right answer:
    :func:`write_tasks` keeps only such): a claim's ``task``, ``returns``, the step's task's ``state``,
    ``generation`` and ``lease_until``, and every task's row as ``snapshot``."""
    states: dict[str, TaskState] = {}
    out: Steps = []
    for step in steps:
        done = dict(step)
        kind = step["step"]
        task = step.get("task")
        if kind == "claim":
            open_ = claimable_tasks(states, float(step["t"]))
            task = open_[0] if open_ else None
            if task is not None:
                done["task"] = task
        if kind in ("register", "claim", "finish", "extend", "resolve"):
            before = states.get(task, TaskState()) if task is not None else TaskState()
            answer = expect(before, step, lease)
            done["returns"] = returns(kind, answer)
            if task is not None:
                s = states[task] = apply(before, step, answer)
                done.update(state=s.state, generation=s.generation, lease_until=s.lease_until)
        done["snapshot"] = {k: [s.state, s.generation, s.lease_until] for k, s in sorted(states.items())
                            if s.state is not None}
        out.append(done)
    return out
