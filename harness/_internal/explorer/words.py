"""What ``takeover explore`` says and writes: the shrunk sequence in words, the JSON, the files.

Why words for every step: the shrunk sequence is the finding. A person reads it as a story (who
claimed what, when, what the queue answered and what the spec says it must answer), and the step
that departs says which promise it breaks; the scenario and pytest files are written by the
replay's own writer (:mod:`takeover._internal.replay.output`), so a fix is tested exactly as a replayed
violation is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from takeover._internal import db
from takeover._internal.explorer.calls import Failure, Step, claim_words
from takeover._internal.explorer.tasks import expected_task_steps
from takeover._internal.options import shell_line
from takeover._internal.replay.core import ReplayReport, TaskReplay
from takeover._internal.replay.model import SPEC, STATE_MATCHES, TaskState, apply, expect
from takeover._internal.replay.output import pytest_text
from takeover._internal.replay.output import write_outputs as write_replay_outputs
from takeover._internal.replay.shrink import Shrunk

SCENARIO_FILE = "explore.json"  # the scenario file in the output folder; the pytest file goes beside it
RESULT_FILE = "explore-result.json"


@dataclass
class Written:
    """The departure as one task's scenario, replayed and shrunk by the replay's machinery."""

    task: str
    shrunk: Shrunk | None  # None: no scenario could be written (the reason says why)
    reason: str = ""
    tasks: list[str] = field(default_factory=list)  # a departure that needs several tasks: the scenario's tasks
    shown: list[Step] = field(default_factory=list)  # and its steps in explore's words (explore.tasks)


@dataclass
class ExploreResult:
    """What one explore found: the counts, and the shrunk departure (None when every step was the spec's)."""

    queue: str
    seed: int
    examples: int
    steps: int
    seconds: float
    db: str
    failure: Failure | None = None
    written: Written | None = None
    scenario_file: Path | None = None
    test_file: Path | None = None
    cells: dict[str, Any] = field(default_factory=dict)
    first: tuple[float, int, int] | None = None  # seconds, examples, steps when the first departure came
    shrink_examples: int = 0  # of the examples, those run to shrink the departure
    flaky_batches: int = 0  # batches cut short: an overlap's order changed what the same draws met
    # The queue did not answer the probe made before any example (a call that never returned): nothing was
    # explored, so the result is neither a pass nor a departure, but INCONCLUSIVE (exit 3), saying which call.
    hung: str | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None and self.hung is None

    @property
    def exit_code(self) -> int:
        return 3 if self.hung is not None else 0 if self.ok else 1

    def message(self) -> str:
        """What a failed test prints: the shrunk sequence in words."""
        return "\n".join(failure_lines(self))

    def to_json(self) -> dict[str, Any]:
        return result_json(self)


def command(result: ExploreResult, examples: int | None = None, seconds: float | None = None) -> str:
    """The command line that explores again with the same seed."""
    parts = ["takeover", "explore", "--queue", result.queue, "--seed", str(result.seed)]
    if examples is not None:
        parts += ["--examples", str(examples)]
    if seconds is not None:
        parts += ["--seconds", f"{seconds:g}"]
    if result.db != db.DEFAULT:
        parts += ["--db", result.db]
    return shell_line(parts)


def step_line(n: int, step: Step) -> str:
    return f"{n:>3}. t={step.spec['t']:g} {operation(step)} -> {step.answered}"


def operation(step: Step) -> str:
    """The call in words: who did what to which task (``A finish t1 done with generation 1``)."""
    spec = step.spec
    kind = spec["step"]
    who = f"{spec['actor']} " if spec.get("actor") else ""
    what = kind
    if kind in ("register", "finish", "extend", "resolve"):
        what += f" {spec['task']}"
    if kind in ("finish", "resolve"):
        what += f" {spec['outcome']}"
    if "with_generation" in spec:
        what += f" with generation {spec['with_generation']}"
    if "lease" in spec:
        what += f" (lease {spec['lease']:g})"
    if spec.get("batch"):
        what += " (through register_many)"
    if "pause_before_statement" in spec:
        what += f", paused before its statement {spec['pause_before_statement']} (on a second queue object)"
    if kind == "exit_and_reopen":
        what = "close the queue and open a new one on the same database"
    if kind == "resume":
        what = "the paused call resumes"
    return f"{who}{what}"


def promise(invariants: tuple[str, ...] | list[str], kind: str = "the call") -> str:
    """What a departure breaks, in words: the invariants by name; ``spec`` (an answer no invariant of a run
    covers: a wrong return value, a raise) is told as the call's wrong answer, never as an invariant."""
    named = [i for i in invariants if i != SPEC]
    if not named:
        return f"a wrong answer to {kind}"
    return "breaks " + ", ".join(named)


def shown_steps(result: ExploreResult) -> list[Step]:
    """The steps explore shows: the written scenario's, when a departure was written (the minimal sequence,
    the one explore.json holds, with the queue's answers and the spec's); else the shrunk example's,
    without the steps that changed nothing the departure needs (calls on other tasks that answered as the
    spec says, before the departing step)."""
    failure = result.failure
    if failure is None:
        return []
    written = result.written
    if written is not None and written.shown:
        return written.shown
    if written is not None and written.shrunk is not None:
        return written_steps(written.shrunk, failure.invariants)
    return failure.steps


def written_steps(sh: Shrunk, invariants: tuple[str, ...]) -> list[Step]:
    """The written scenario's steps as explore's steps: the queue's answers (the scenario's replay) and the
    model's, the departing step last, with the departure's invariants and words."""
    wanted = next((i for i in invariants if sh.outcome.breaks(i)), None)
    departure = sh.outcome.first(wanted) if wanted else (sh.outcome.departures[0] if sh.outcome.departures else None)
    state = TaskState()
    out: list[Step] = []
    for n, (raw, answer) in enumerate(zip(sh.steps, sh.outcome.answers, strict=False), start=1):
        spec = {"t": raw.get("t", 0), "actor": raw.get("actor"), **{k: v for k, v in raw.items() if k not in _EXPECTED}}
        kind = spec["step"]
        if kind in ("register", "finish", "extend", "resolve"):
            spec["task"] = sh.task
        lease = float(spec.get("lease", sh.lease)) if kind == "claim" else sh.lease
        want = expect(state, spec, sh.lease) if kind in ("claim", "finish", "extend", "resolve") else None
        if kind == "claim":
            got = None if answer is None else (sh.task, answer, float(spec["t"]) + lease)
            answered = claim_words(got)
            expected = "None (nothing claimable)" if want is None else claim_words((sh.task, *want))
            state = apply(state, spec, None if answer is None else (answer, float(spec["t"]) + lease))
        elif kind in ("finish", "extend", "resolve"):
            answered, expected = repr(answer), repr(want)
            state = apply(state, spec, answer)
        else:
            answered = expected = "nothing"
            state = apply(state, spec, answer) if kind == "register" else state
        last = departure is not None and n == departure.index
        out.append(Step(spec, answered, expected, sh.task,
                        tuple(departure.invariants) if last and departure else (),
                        departure.what if last and departure else ""))
        if last:
            break
    return out


_EXPECTED = ("returns", "state", "generation", "lease_until", "ledger_actions", "label", "why", "gap_first")


def failure_lines(result: ExploreResult) -> list[str]:
    """The minimal sequence, a line a step; the departing step's operation, what the queue answered and
    what the spec says (or, when the answer was the spec's, what in the snapshot after it differs), and
    the promise it breaks."""
    failure = result.failure
    if failure is None:
        return []
    steps = shown_steps(result) or failure.steps
    tasks = len({s.task for s in steps if s.task}) or failure.tasks
    last = steps[-1]
    invariants = last.invariants or failure.invariants
    what = last.what or failure.what
    lines = [f"DEPARTED from the spec: {promise(invariants, last.spec['step'])} (shrunk to {len(steps)} step(s), "
             f"{tasks} task(s))"]
    for n, step in enumerate(steps, start=1):
        lines.append(step_line(n, step))
    op = f"step {len(steps)}, {operation(last)}"
    if last.spec["step"] == "resume":  # two calls at once: judged once both are done, by their answers above
        lines.append(f"     {op}: the two calls at once (steps {len(steps) - 2} and {len(steps) - 1}) answered as "
                     "above, and no order of the two is the spec's")
    elif last.answered != last.expected:
        lines.append(f"     {op}: the queue answered {last.answered}; the spec says {last.expected}")
    else:
        after = "the snapshot read after it does not show it" if STATE_MATCHES in invariants else "see why below"
        lines.append(f"     {op}: the queue answered {last.answered}, as the spec says; {after}")
    named = [i for i in invariants if i != SPEC]
    lines.append(f"     {'breaks ' + ', '.join(named) if named else 'why'}: {what}")
    written = result.written
    if written is not None and written.shrunk is None:
        lines.append(f"No scenario file: {written.reason}.")
    return lines


def result_json(result: ExploreResult) -> dict[str, Any]:
    out: dict[str, Any] = {
        "queue": result.queue,
        "db": result.db,
        "seed": result.seed,
        "ok": result.ok,
        "hung": result.hung,
        "examples": result.examples,
        "steps": result.steps,
        "seconds": round(result.seconds, 3),
        "shrink_examples": result.shrink_examples,
        "flaky_batches": result.flaky_batches,
        "first_departure": None if result.first is None else {
            "seconds": round(result.first[0], 3), "example": result.first[1], "step": result.first[2]},
        "cells": result.cells,
        "departure": None,
        "scenario_file": str(result.scenario_file) if result.scenario_file else None,
        "test_file": str(result.test_file) if result.test_file else None,
    }
    failure = result.failure
    if failure is not None:
        out["departure"] = {
            "invariants": list(failure.invariants),
            "what": failure.what,
            "tasks": failure.tasks,
            "steps": [{**{k: v for k, v in s.spec.items()}, "answered": s.answered, "expected": s.expected,
                       **({"invariants": list(s.invariants)} if s.invariants else {})} for s in shown_steps(result)],
            "found_steps": len(failure.steps),  # the shrunk example's steps, before the scenario's own shrinking
            "scenario": None if result.written is None or result.written.shrunk is None else {
                "task": result.written.task, "steps": len(result.written.shrunk.steps),
                **({"tasks": result.written.tasks} if result.written.tasks else {})},
            "no_scenario_because": result.written.reason if result.written is not None else "",
        }
    return out


def write_outputs(result: ExploreResult, out: Path) -> tuple[Path, Path]:
    """The scenario file and the pytest file, written by the replay's writer into ``out``."""
    written = result.written
    assert written is not None and written.shrunk is not None and result.failure is not None
    sh = written.shrunk
    inv = next((i for i in result.failure.invariants if sh.outcome.breaks(i)), result.failure.invariants[0])
    origin = f"takeover explore --queue {result.queue} --seed {result.seed}"
    if written.tasks:
        return _write_tasks(result, out, inv, origin)
    tr = TaskReplay(written.task, [inv], None, shrunk={inv: sh}, reproduced=[inv])  # type: ignore[arg-type]
    report = ReplayReport(out, result.queue, None, [tr], 0, 0.0, origin=origin)
    scenario_file, test_file, _ids = write_replay_outputs(report, out / SCENARIO_FILE)
    return scenario_file, test_file


def _write_tasks(result: ExploreResult, out: Path, inv: str, origin: str) -> tuple[Path, Path]:
    """A departure that needs several tasks: one scenario naming them all (``tasks``), its steps' expectations
    from the model of several tasks (explore.tasks), written beside its pytest file as the replay writes its own."""
    written = result.written
    assert written is not None and written.shrunk is not None
    sh = written.shrunk
    steps = expected_task_steps(sh.steps, sh.lease)
    first = sh.outcome.first(inv)
    what = first.what if first is not None else ""
    if first is not None:
        steps[first.index - 1]["why"] = (f"checks {inv}: found by {origin}, {result.queue.rpartition(':')[2]} "
                                         f"answered this step wrong ({what})")
    doc = {"source": origin, "title": f"Found by {origin}", "queue": result.queue, "lease_seconds": sh.lease,
           "scenarios": [{"id": inv, "title": f"{inv}: {what.split('; ')[0]}" if what else inv,
                          "heading": f"found by {origin}, shrunk ({len(written.tasks)} tasks)",
                          "tasks": written.tasks, "steps": steps}]}
    out.mkdir(parents=True, exist_ok=True)
    scenario_file = out / SCENARIO_FILE
    scenario_file.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    test_file = scenario_file.with_name(f"test_{scenario_file.stem}.py")
    report = ReplayReport(out, result.queue, None, [], 0, 0.0, origin=origin)
    test_file.write_text(pytest_text(report, doc, scenario_file), encoding="utf-8")
    return scenario_file, test_file


def summary_line(result: ExploreResult) -> str:
    """Examples, steps, seconds, the first departure's time, and the coverage cells reached."""
    shrink = f" ({result.shrink_examples} to shrink)" if result.shrink_examples else ""
    line = f"{result.examples} example(s){shrink}, {result.steps} step(s) in {result.seconds:.1f} s"
    if result.first is not None:
        seconds, examples, steps = result.first
        line += f"; first departure after {seconds:.2f} s (example {examples}, step {steps}), then shrunk"
    cells = result.cells
    if cells.get("total"):
        line += (f"\nmodel coverage: {cells['reached']} of {cells['total']} possible cells reached "
                 f"({cells['important_reached']} of {cells['important_total']} where the spec says no or a lease "
                 "ends)")
    overlaps = cells.get("overlaps") or {}
    if overlaps:
        line += "\n" + overlap_line(overlaps)
    return line


def overlap_line(overlaps: dict[str, int]) -> str:
    """The overlaps reached (coverage's ``overlaps``: ``claim@3/locked/claim`` and so on) in one line: how
    many, which calls were paused, and where they stood when the call in the gap ran."""
    paused: dict[str, int] = {}
    stood: dict[str, int] = {}
    for key, n in overlaps.items():
        op, _, rest = key.partition("@")
        paused[op] = paused.get(op, 0) + n
        where = rest.split("/")[1] if "/" in rest else ""
        stood[where] = stood.get(where, 0) + n
    ops = ", ".join(f"{op} {n}" for op, n in sorted(paused.items(), key=lambda x: -x[1]))
    words = {"locked": "holding the write lock", "unlocked": "holding no write lock",
             "ended": "returned before the statement"}
    where = "; ".join(f"{stood[k]} {w}" for k, w in words.items() if stood.get(k))
    return (f"overlaps: {sum(overlaps.values())} call(s) paused inside themselves while another ran ({ops}); "
            f"{where}; {len(overlaps)} distinct situation(s)")
