"""Replay the spec's five reference scenarios (S1–S5), or a scenario file's, against any queue, on a logical clock.

Why a replay and not five unit tests: the scenarios are the spec. A user who writes their own queue runs
``takeover scenarios --queue mymod:MyQueue`` and sees, step by step, where their queue departs from it.
Each scenario runs on its own fresh queue and database (:mod:`takeover._internal.scenario.engine`), its steps one
after another, or three at once where a step pauses a call inside itself (:mod:`takeover._internal.scenario.overlap`).

The expected results travel with the package (``harness/data/scenarios.json``, built from the
spec's tables, its English text and the Chinese original: docs/spec.json, docs/spec.md and
docs/spec.zh.md), because an installed package has no docs/ folder.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from takeover._internal.scenario.engine import (
    DEFAULT_STEP_TIMEOUT,
    TASK_ID,
    Replay,
    StepHung,
    check_step_timeout,
    live_queue,
    one_line,
)
from takeover._internal.scenario.overlap import group_at, run_group
from takeover._internal.scenario.results import Hang, ReplayedScenario, StepResult
from takeover.contract import QueueFactory, load_queue_factory
from takeover.errors import UsageError


def load_spec() -> dict[str, Any]:
    """The expected results the project carries: title, headings, steps, and why-texts in en/zh."""
    text = resources.files("takeover").joinpath("data", "scenarios.json").read_text(encoding="utf-8")
    return json.loads(text)


def scenario_ids(spec: dict[str, Any] | None = None) -> list[str]:
    spec = spec or load_spec()
    return [s["id"] for s in spec["scenarios"]]


def run_scenario(
    scenario: dict[str, Any],
    queue_spec: str,
    factory: QueueFactory,
    lease: float,
    step_timeout: float = DEFAULT_STEP_TIMEOUT,
) -> ReplayedScenario:
    """Replay one scenario in its own temporary folder, removed afterwards whatever happens
    (Ctrl-C included: a KeyboardInterrupt while a call hangs leaves through the same finally)."""
    lease = float(scenario.get("lease_seconds", lease))
    with live_queue(str(scenario["id"]), queue_spec, factory, lease, step_timeout,
                    scenario.get("task", TASK_ID), tuple(scenario.get("tasks", ()))) as replay:
        return _replay(scenario, replay, step_timeout)


def _replay(scenario: dict[str, Any], replay: Replay, step_timeout: float) -> ReplayedScenario:
    steps = [StepResult(index=i, spec=st) for i, st in enumerate(scenario["steps"], start=1)]
    result = ReplayedScenario(id=scenario["id"], spec=scenario, steps=steps)
    try:
        replay.open()
    except StepHung as hung:
        result.hung = Hang(hung.call, None, step_timeout, str(hung))
    ran = 0  # steps already run (an overlap runs three)
    for n, step in enumerate(steps):
        if result.hung is not None:
            step.skipped = True
            continue
        if n < ran:
            continue
        ran = n + 3 if group_at(steps, n) else n + 1
        step_hang = run_group(replay, steps, n) if ran == n + 3 else replay.run_step(step)
        if step_hang is not None:
            result.hung = Hang(step_hang.call, step.index, step_timeout, str(step_hang))
    if result.hung is None:
        try:
            result.final_ledger_actions = replay.performed_count()
        except Exception as exc:  # noqa: BLE001
            result.ledger_error = one_line(exc)
    return result


def run_scenarios(
    queue_spec: str,
    only: list[str] | None = None,
    step_timeout: float = DEFAULT_STEP_TIMEOUT,
    doc: dict[str, Any] | None = None,
) -> list[ReplayedScenario]:
    """Replay the chosen scenarios (all by default) of ``doc`` (the spec's five when None; a file's
    from :func:`takeover._internal.scenario.file.load_scenario_file`) against ``queue_spec`` (``MODULE:ATTR``).

    Raises :class:`UsageError` (exit 2) for a queue that cannot be loaded, built or does not offer
    the contract, for an unknown scenario id and for a step timeout that is not a positive number.
    """
    step_timeout = check_step_timeout(step_timeout)
    spec = doc if doc is not None else load_spec()
    known = scenario_ids(spec)
    by_key = {k.upper(): k for k in known}
    wanted = [s if s in known else by_key.get(s.upper(), s) for s in only] if only else known
    unknown = [s for s in wanted if s not in known]
    if unknown:
        raise UsageError(f"unknown scenario {unknown[0]!r}; choose from {', '.join(known)}")
    factory = load_queue_factory(queue_spec)
    lease = float(spec["lease_seconds"])
    return [
        run_scenario(sc, queue_spec, factory, lease, step_timeout)
        for sc in spec["scenarios"]
        if sc["id"] in wanted
    ]


def results_to_json(
    results: list[ReplayedScenario],
    queue_spec: str,
    step_timeout: float = DEFAULT_STEP_TIMEOUT,
    doc: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec = doc if doc is not None else load_spec()
    return {
        "queue": queue_spec,
        "lease_seconds": spec["lease_seconds"],
        "step_timeout": step_timeout,
        "ok": all(r.ok for r in results),
        "scenarios": [r.to_json() for r in results],
    }
