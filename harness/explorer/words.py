"""What ``takeover explore`` says and writes: the shrunk sequence in words, the JSON, the files.

Why words for every step: the shrunk sequence is the finding. A person reads it as a story (who
claimed what, when, what the queue answered and what the spec says it must answer), and the step
that departs says which promise it breaks; the scenario and pytest files are written by the
replay's own writer (:mod:`takeover.replay.output`), so a fix is tested exactly as a replayed
violation is.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from takeover import db
from takeover.options import shell_line
from takeover.replay.core import ReplayReport, TaskReplay
from takeover.replay.output import write_outputs as write_replay_outputs

if TYPE_CHECKING:
    from takeover.explorer.core import ExploreResult
    from takeover.explorer.machine import Step

SCENARIO_FILE = "explore.json"  # the scenario file in the output folder; the pytest file goes beside it
RESULT_FILE = "explore-result.json"


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
    return f"{n:>3}. t={spec['t']:g} {who}{what} -> {step.answered}"


def failure_lines(result: ExploreResult) -> list[str]:
    """The shrunk sequence, a line a step; the departing step with the spec's answer and the invariant."""
    failure = result.failure
    if failure is None:
        return []
    lines = [f"DEPARTED from the spec: {', '.join(failure.invariants)} (shrunk to {len(failure.steps)} step(s), "
             f"{failure.tasks} task(s))"]
    for n, step in enumerate(failure.steps, start=1):
        lines.append(step_line(n, step))
    last = failure.steps[-1]
    lines.append(f"     the queue answered {last.answered}; the spec says {last.expected}")
    lines.append(f"     breaks {', '.join(failure.invariants)}: {failure.what}")
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
                       **({"invariants": list(s.invariants)} if s.invariants else {})} for s in failure.steps],
            "scenario": None if result.written is None or result.written.shrunk is None else {
                "task": result.written.task, "steps": len(result.written.shrunk.steps)},
            "no_scenario_because": result.written.reason if result.written is not None else "",
        }
    return out


def write_outputs(result: ExploreResult, out: Path) -> tuple[Path, Path]:
    """The scenario file and the pytest file, written by the replay's writer into ``out``."""
    written = result.written
    assert written is not None and written.shrunk is not None and result.failure is not None
    sh = written.shrunk
    inv = next((i for i in result.failure.invariants if sh.outcome.breaks(i)), result.failure.invariants[0])
    tr = TaskReplay(written.task, [inv], None, shrunk={inv: sh}, reproduced=[inv])  # type: ignore[arg-type]
    report = ReplayReport(out, result.queue, None, [tr], 0, 0.0, origin=f"takeover explore --queue {result.queue} "
                          f"--seed {result.seed}")
    scenario_file, test_file, _ids = write_replay_outputs(report, out / SCENARIO_FILE)
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
