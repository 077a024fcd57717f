"""``replay_run``: from a run's violations to one-process replays, reproduced or explained, and shrunk.

Why one task at a time, on a queue that holds only that task: ``claim`` hands out whichever task
is claimable, so on a queue with other tasks the replay could not make the same task come back;
every invariant the checker judges is about one task's calls. What a one-task replay cannot show
(a race between two calls in flight at once, a task passed over because of the *other* rows in the
table) is said in words, with the evidence, instead of being counted as reproduced.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from takeover._internal import locate
from takeover._internal.bridge import ExecFactory
from takeover._internal.checker import analyse
from takeover._internal.checker.facts import Facts
from takeover._internal.locate import canonical_module
from takeover._internal.replay.calls import Call, TaskCalls, task_calls
from takeover._internal.replay.judge import Outcome, Replayer, ReplayHung
from takeover._internal.replay.model import LEASE_EXCLUSIVE, NO_LOST_TASK, STATE_MATCHES
from takeover._internal.replay.shrink import Shrunk, drop_default_lease, shrink
from takeover._internal.scenario.engine import DEFAULT_STEP_TIMEOUT
from takeover.contract import load_queue_factory
from takeover.errors import UsageError

DEFAULT_REPEAT = 10  # how often the shrunk scenario is replayed again to show it breaks every time


@dataclass
class TaskReplay:
    """One task: what the checker found, what the replay showed, and the shrunk sequences."""

    task: str
    flagged: list[str]  # invariants the checker found broken on this task
    calls: TaskCalls
    tried: int = 0  # placements replayed
    variant: str | None = None  # the placement that reproduced (the first one, if none did)
    outcome: Outcome | None = None
    steps: list[dict[str, Any]] = field(default_factory=list)  # the replayed sequence of that placement
    sources: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # invariant -> the sequence showing it
    reproduced: list[str] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)  # invariant -> why it did not reproduce
    shrunk: dict[str, Shrunk] = field(default_factory=dict)
    same_as: dict[str, str] = field(default_factory=dict)  # invariant -> the task whose shrink stands for it
    repeats: dict[str, tuple[int, int]] = field(default_factory=dict)  # invariant -> (broke, of)
    matched: tuple[int, int] = (0, 0)  # calls answered as recorded, of the determinate calls replayed
    clean: bool = False  # every placement replayed was answered as the spec says (no departure at all)
    beyond: list[str] = field(default_factory=list)  # flagged invariants a one-task replay cannot judge

    @property
    def departed(self) -> bool:
        return bool(self.outcome and self.outcome.departures)


@dataclass(frozen=True)
class SavedScenarios:
    """The shrunk scenarios an earlier replay of the run wrote (``replay.json``), run on the queue named:
    the boundary cases the shrinker found (a finish exactly at the lease's end), beside the recorded calls."""

    file: Path
    passed: list[str]
    failed: list[str]  # "id: the first failure"


@dataclass
class ReplayReport:
    run_dir: Path
    queue: str
    recorded_queue: str | None
    tasks: list[TaskReplay]
    replays: int  # queue replays run in all
    t0: float  # the run's first record, for relative times
    skipped: int = 0  # violating tasks left out by max_tasks
    hung: str | None = None  # the queue call that did not return, which stopped the replay
    queue_from_run: bool = True  # replayed on the run's own queue (no --queue)
    own_queue: bool = True  # the run's own queue: no --queue, or --queue naming the one the run recorded
    saved: SavedScenarios | None = None  # an earlier replay's scenarios, run on this queue (check_saved)
    origin: str | None = None  # the command that found the sequences when not a replay (takeover explore ...)

    @property
    def reproduced(self) -> list[TaskReplay]:
        return [t for t in self.tasks if t.reproduced]

    @property
    def fixed(self) -> bool:
        """A fix, as far as one process can show it: another queue than the run's was named, every
        violating task of the run was replayed on it (none left out, no hang), and in every placement
        tried it answered every call as the spec says, on tasks whose violations a one-task replay can
        judge (not a race, not a task passed over among others). It proves these recorded sequences no
        longer break the queue; it does not prove the queue correct."""
        return (not self.own_queue and not self.hung and not self.skipped and any(t.flagged for t in self.tasks)
                and all(t.clean and not t.reproduced and not t.beyond for t in self.tasks)
                and (self.saved is None or not self.saved.failed))


def check_saved(report: ReplayReport, path: Path, step_timeout: float = DEFAULT_STEP_TIMEOUT) -> None:
    """Run the scenarios an earlier replay of the run wrote to ``path`` (if there are any) on the queue
    named, when the recorded calls alone would say FIXED: the shrunk sequences sit on the boundaries
    (t = 0, 1, 2 ..., a finish exactly at the lease's end) the run's own calls only came near. A bad
    file is a one-line UsageError, as ``takeover scenarios --file`` gives."""
    if not report.fixed or not path.is_file():
        return
    from takeover._internal.scenario.file import load_scenario_file
    from takeover._internal.scenario.replay import run_scenarios

    results = run_scenarios(report.queue, step_timeout=step_timeout, doc=load_scenario_file(path))
    report.saved = SavedScenarios(path, [r.id for r in results if r.ok],
                                  [f"{r.id}: {r.failures()[0]}" for r in results if not r.ok])


def run_queue(config: dict[str, Any], queue: str | None) -> str:
    """The queue to replay on: the one named, or the run's own (an old ``harness.`` name read as
    the ``takeover.`` module it meant)."""
    if queue:
        return queue
    recorded = config.get("queue")
    if not isinstance(recorded, str) or ":" not in recorded:
        raise UsageError("the run's config.json names no queue (queue = MODULE:ATTR); pass --queue")
    module, _, attr = recorded.partition(":")
    return f"{canonical_module(module)}:{attr}"


def replay_run(run_dir: str | Path, tasks: list[str] | None = None, queue: str | None = None, *,
               repeat: int = DEFAULT_REPEAT, step_timeout: float = DEFAULT_STEP_TIMEOUT,
               max_tasks: int | None = None) -> ReplayReport:
    """Replay every violating task of the run (or the tasks named) on ``queue`` and shrink what
    reproduces. Bad input (not a run folder, an unknown task, a queue that cannot load) is a
    :class:`UsageError` or :class:`~takeover.errors.ContractError`, one line."""
    result = analyse(run_dir)
    fx = result.facts
    spec = run_queue(fx.config, queue)
    if not queue:
        locate.run_folders_first(fx.config)
    factory = load_queue_factory(spec)
    workdir = fx.config.get("workdir")
    if not queue and isinstance(factory, ExecFactory) and isinstance(workdir, str) and os.path.isdir(workdir):
        factory.cwd = workdir  # an exec: queue's command runs from the folder the run's was given from
    replayer = Replayer(spec, factory, step_timeout)
    flagged: dict[str, list[str]] = {}
    for name, res in result.invariants.items():
        if res.valid is False:
            for code in res.tasks:
                task = fx.name(code)
                if task is not None:
                    flagged.setdefault(task, []).append(name)
    named = list(dict.fromkeys(tasks or []))
    for task in named:
        if fx.code(task) < 0:
            raise UsageError(f"task {task!r} is not in the run's history ({result.run_dir})")
    chosen = named or sorted(flagged)
    skipped = 0
    if not named and max_tasks is not None and len(chosen) > max_tasks:
        chosen, skipped = chosen[:max_tasks], len(chosen) - max_tasks
    out: list[TaskReplay] = []
    shrunk_for: dict[str, str] = {}  # invariant -> the first task shrunk for it
    hung: str | None = None
    for task in chosen:
        tr = TaskReplay(task, flagged.get(task, []), task_calls(fx, task, probe_empty=NO_LOST_TASK in
                                                                flagged.get(task, [])))
        out.append(tr)
        try:
            _replay_task(fx, replayer, tr)
            for inv in tr.reproduced:
                if named or inv not in shrunk_for:
                    tr.shrunk[inv] = shrink(replayer, task, tr.calls.lease, tr.sources[inv], inv)
                    tr.repeats[inv] = _repeat(replayer, tr.shrunk[inv], inv, repeat)
                    shrunk_for.setdefault(inv, task)
                else:
                    tr.same_as[inv] = shrunk_for[inv]
        except ReplayHung as exc:
            hung = str(exc)
            tr.shrunk.clear()
            tr.reproduced, tr.missed = [], list(tr.flagged)
            tr.reasons = dict.fromkeys(tr.flagged, f"the queue hung in the replay: {hung}; the replay stopped there")
            skipped += len(chosen) - len(out)
            break
    return ReplayReport(result.run_dir, spec, fx.config.get("queue"), out, replayer.runs, fx.t0, skipped, hung,
                        queue_from_run=not queue, own_queue=not queue or spec == _recorded(fx.config))


def _recorded(config: dict[str, Any]) -> str | None:
    """The run's own queue as ``run_queue`` reads it (None when config.json names none)."""
    try:
        return run_queue(config, None)
    except UsageError:
        return None


def _steps(tc: TaskCalls, calls: list[Call], t0: float) -> list[dict[str, Any]]:
    """The calls as steps, on the run's clock from its first record (seconds since the run started,
    as the reports show them): every order between two ``now``s, and between a ``now`` and a lease,
    is the recorded one."""
    return drop_default_lease([dict(c.step(), t=c.now - t0) for c in calls], tc.lease)


def _replay_task(fx: Facts, replayer: Replayer, tr: TaskReplay) -> None:
    """Replay the placements of ``tr``'s calls until every invariant the checker found on it shows
    (or none is left to try); fills in ``tr``."""
    tc, task, flagged = tr.calls, tr.task, tr.flagged
    wanted = set(flagged)
    first: tuple[str, list[Call], Outcome] | None = None
    found: dict[str, tuple[str, list[Call], Outcome]] = {}
    tr.clean = True
    for name, calls in tc.variants():
        if not calls:
            continue
        outcome = replayer.run(task, tc.lease, _steps(tc, calls, fx.t0))
        tr.tried += 1
        tr.clean = tr.clean and not outcome.departures
        if first is None:
            first = (name, calls, outcome)
        for inv in (outcome.invariants() & wanted) - set(found):
            found[inv] = (name, calls, outcome)
        if wanted and wanted <= set(found):
            break
        if not wanted and outcome.departures:
            first = (name, calls, outcome)
            break
    pick = next((found[inv] for inv in flagged if inv in found), first)
    if pick is not None:
        tr.variant, calls, tr.outcome = pick
        tr.steps = _steps(tc, calls, fx.t0)
        tr.matched = _matched(calls, tr.outcome, fx.t0)
    tr.reproduced = [inv for inv in flagged if inv in found]
    # Each reproduced invariant is shrunk from the placement that showed it.
    tr.sources = {inv: _steps(tc, found[inv][1], fx.t0) for inv in tr.reproduced}
    tr.missed = [inv for inv in flagged if inv not in found]
    for inv in tr.missed:
        tr.reasons[inv], judged = _why_not(tc, inv, tr.outcome, _final_state(fx, task))
        if not judged:
            tr.beyond.append(inv)
    if not flagged and tr.outcome is not None:
        # A task named without a violation: whatever the queue breaks on it is the finding.
        tr.reproduced = sorted(tr.outcome.invariants())
        tr.sources = dict.fromkeys(tr.reproduced, tr.steps)


def _final_state(fx: Facts, task: str) -> str | None:
    """The task's state in the run's final snapshot (None when the snapshot does not list it)."""
    snap = fx.run.snapshot
    if snap is None:
        return None
    rows = snap[snap["task"].to_numpy(dtype="float64") == fx.code(task)]
    return None if rows.empty else str(rows["state"].iloc[0])


def _matched(calls: list[Call], outcome: Outcome, t0: float) -> tuple[int, int]:
    """How many of the calls with a known recorded answer got that answer again (a heartbeat's new
    lease on the replay's clock, which starts at the run's first record)."""
    same = total = 0
    for call, got in zip(calls, outcome.answers, strict=False):
        if call.status not in ("ok", "fail") or call.probe or call.kind == "register":
            continue
        total += 1
        recorded = call.recorded
        if call.kind == "claim" and call.status == "fail":
            recorded = None
        if call.kind == "extend" and isinstance(recorded, float):
            recorded -= t0
        same += got == recorded or (isinstance(got, float) and isinstance(recorded, float)
                                    and math.isclose(got, recorded, abs_tol=1e-6))
    return same, total


def _repeat(replayer: Replayer, sh: Shrunk, invariant: str, times: int) -> tuple[int, int]:
    """Replay the shrunk sequence again, each time on a fresh file: it must break every time, with
    the same answers. One shrunk sequence often stands for several invariants: it is replayed once."""
    outcomes = replayer.repeated(sh.task, sh.lease, sh.steps, times)
    signature = sh.outcome.signature
    return sum(1 for o in outcomes if o.breaks(invariant) and o.signature == signature), times


def _why_not(tc: TaskCalls, invariant: str, outcome: Outcome | None, final_state: str | None) -> tuple[str, bool]:
    """Why a violation the checker found does not show in one process, with the evidence; and whether
    the one-task replay could judge it at all, so that a queue answering as the spec says there is not
    taken for a fix. False where the history shows what the replay cannot make (two claims in flight at
    once, a claim that passed the task over among others, a finish without its action: the worker's
    doing) or the replay has nothing to ask; a snapshot that disagreed is judged (the replay compares
    the snapshot after every step)."""
    tried = "every placement tried" if len(tc.indeterminate) else "the replay"
    first = outcome.departures[0] if outcome is not None and outcome.departures else None
    if first is not None:
        others = ", ".join(sorted(outcome.invariants())) if outcome is not None else ""
        instead = f" (in {tried} the queue breaks {others} instead; step {first.index}: {first.what})"
        answers = f"in {tried} the queue breaks {others} instead (step {first.index}: {first.what})"
    else:
        instead, answers = "", f"in {tried} the queue answers every call as the spec says"
    if invariant == LEASE_EXCLUSIVE:
        races = [(a, b) for a, b in tc.overlapping() if a.kind == "claim" and b.kind == "claim"]
        if races:
            a, b = races[0]
            return (f"the two claims that both got a lease were in flight at the same time (process {a.process} "
                    f"got generation {a.recorded}, process {b.process} generation {b.recorded}, each invoked "
                    "before the other returned): one process can only make them one after the other, and "
                    f"then the queue refuses the second{instead}. The bug needs two claims at once (a race), "
                    "which a one-process replay cannot make"), False
    if invariant == NO_LOST_TASK:
        probes = [c for c in tc.calls if c.probe]
        if probes:
            p = probes[0]
            took = "no task" if p.recorded is None else f"task {p.recorded}, registered after it"
            return (f"on a queue that holds only this task, a claim takes it; in the run, a claim made while it "
                    f"was pending (process {p.process}) got {took}{instead}. The queue passes it over only "
                    "among the other tasks of its table, which a one-task replay leaves out"), False
        if final_state in ("done", "uncertain"):
            return ("it was finished without its action at the service attempted: that is the worker's doing, "
                    "which the queue cannot see, and the replay makes no actions"), False
        if not any(c.kind == "claim" for c in tc.calls):
            return (f"no claim in the run passed it over while it was pending (none came back empty or with "
                    f"a task registered after it), so the replay has nothing to ask the queue{instead}"), False
        return f"after the drain it was left {final_state or 'unfinished'}; {answers}", True
    if invariant == STATE_MATCHES and first is None:
        return (f"the final snapshot disagreed with the history, but in {tried} every snapshot agrees with "
                "the queue's answers: what it showed may depend on other tasks or calls"), True
    return answers, True
