"""Replay the spec's five reference scenarios (S1–S5) against any queue, on a logical clock.

Why a replay engine and not five unit tests: the scenarios are the spec. A user who writes their
own queue runs ``takeover scenarios --queue mymod:MyQueue`` and sees, step by step, where their
queue departs from it. So the engine drives the queue only through the contract
(:mod:`harness.contract`), on a real SQLite file (a fresh temporary one per scenario), and reads
every observed state from the queue's own ``snapshot()`` — never from our bookkeeping.

The expected results travel with the package (``harness/data/scenarios.json``, built from the
spec's ``scenarios.json``, ``scenarios-en.md`` and the Chinese original), because users do not
have the spec folder.

A queue that raises inside a step does not stop the replay: the step is a mismatch that carries
the exception in one line, and the next steps still run, so one run shows every departure.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from harness.contract import (
    LeaseQueue,
    QueueFactory,
    load_queue_factory,
    open_queue,
    validate_claim_result,
    validate_finish_result,
    validate_snapshot,
)
from harness.errors import UsageError
from harness.ledger import Ledger

TASK_ID = "task"
LANGS = ("en", "zh")
# The keys of a spec step that describe what the step does (not what it observes).
ACTION_KEYS = ("outcome", "with_generation", "response_lost")
# What is compared, in the order mismatches are reported.
OBSERVED_KEYS = ("returns", "state", "generation", "lease_until", "ledger_actions")


def load_spec() -> dict[str, Any]:
    """The expected results the project carries: title, headings, steps, and why-texts in en/zh."""
    text = resources.files("harness").joinpath("data", "scenarios.json").read_text(encoding="utf-8")
    return json.loads(text)


def scenario_ids(spec: dict[str, Any] | None = None) -> list[str]:
    spec = spec or load_spec()
    return [s["id"] for s in spec["scenarios"]]


def one_line(exc: BaseException) -> str:
    """An exception as one line: the transcript and --json must never carry a traceback."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def same(expected: Any, got: Any) -> bool:
    """Equality that tells True from 1: finish returns a bool, claim a generation."""
    if isinstance(expected, bool) or isinstance(got, bool):
        return type(expected) is type(got) and expected == got
    if isinstance(expected, (int, float)) and isinstance(got, (int, float)):
        return float(expected) == float(got)
    return expected == got


@dataclass
class StepResult:
    """One replayed step: the spec's step, what the queue did, and how they differ."""

    index: int  # 1-based, as numbered in the spec's tables
    spec: dict[str, Any]
    observed: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)  # one line each: exceptions, contract breaches
    mismatches: list[str] = field(default_factory=list)  # keys of OBSERVED_KEYS that differ

    @property
    def ok(self) -> bool:
        return not self.errors and not self.mismatches

    def expected(self) -> dict[str, Any]:
        return {k: self.spec[k] for k in OBSERVED_KEYS if k in self.spec}

    def compare(self) -> None:
        self.mismatches = [
            k for k, want in self.expected().items() if not same(want, self.observed.get(k))
        ]

    def to_json(self) -> dict[str, Any]:
        """The spec's step shape (same keys, same step names) with the observed values."""
        out: dict[str, Any] = {"t": self.spec["t"], "actor": self.spec["actor"], "step": self.spec["step"]}
        for key in ACTION_KEYS:
            if key in self.spec:
                out[key] = self.spec[key]
        for key in OBSERVED_KEYS:
            if key in self.spec:
                out[key] = self.observed.get(key)
        out["ok"] = self.ok
        if not self.ok:
            out["expected"] = self.expected()
            out["mismatch"] = list(self.mismatches)
        if self.errors:
            out["error"] = "; ".join(self.errors)
        return out


@dataclass
class ScenarioResult:
    id: str
    spec: dict[str, Any]
    steps: list[StepResult]
    final_ledger_actions: int | None = None
    ledger_error: str | None = None

    @property
    def ledger_ok(self) -> bool:
        want = self.spec.get("final_ledger_actions")
        return self.ledger_error is None and (want is None or want == self.final_ledger_actions)

    @property
    def ok(self) -> bool:
        return self.ledger_ok and all(s.ok for s in self.steps)

    def failed_steps(self) -> list[StepResult]:
        return [s for s in self.steps if not s.ok]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "title": self.spec["title"], "ok": self.ok}
        if "final_ledger_actions" in self.spec:
            out["final_ledger_actions"] = self.final_ledger_actions
            if not self.ledger_ok:
                out["expected_final_ledger_actions"] = self.spec["final_ledger_actions"]
                if self.ledger_error:
                    out["ledger_error"] = self.ledger_error
        out["steps"] = [s.to_json() for s in self.steps]
        return out


class _Replay:
    """The state of one scenario's replay: its files, the open queue, what each actor holds."""

    def __init__(self, queue_spec: str, factory: QueueFactory, workdir: Path, lease: float) -> None:
        self.queue_spec = queue_spec
        self.factory = factory
        self.db_path = str(workdir / "queue.sqlite")
        self.lease = lease
        self.ledger = Ledger(str(workdir / "ledger.sqlite"), remedy="none")
        # The first open is outside any step: a queue that cannot even be built is bad input
        # (ContractError, exit 2), not a departure from the spec.
        try:
            self.queue: LeaseQueue | None = open_queue(queue_spec, self.db_path, factory)
        except BaseException:
            self.ledger.close()
            raise
        self.held: dict[str, int] = {}  # actor -> generation of its latest claim

    def close(self) -> None:
        for closer in (getattr(self.queue, "close", None), self.ledger.close):
            if closer is None:
                continue
            try:
                closer()
            except Exception:  # noqa: BLE001 - cleanup of a possibly broken user queue
                pass
        self.queue = None

    def _queue(self) -> LeaseQueue:
        if self.queue is None:
            raise RuntimeError("queue is not open (an earlier reopen failed)")
        return self.queue

    def run_step(self, result: StepResult) -> None:
        """Perform one step, then observe; any exception becomes a one-line error on the step."""
        st = result.spec
        try:
            result.observed["returns"] = self._act(st, result)
        except Exception as exc:  # noqa: BLE001 - a raising queue is a finding, not a crash
            result.errors.append(one_line(exc))
            result.observed["returns"] = None
        self._observe(result)
        result.compare()

    def _act(self, st: dict[str, Any], result: StepResult) -> Any:
        kind, t, actor = st["step"], st["t"], st["actor"]
        if kind == "register":
            self._queue().register(TASK_ID, t)
            return None
        if kind == "claim":
            got = validate_claim_result(self._queue().claim(actor, t, self.lease), self.queue_spec)
            if got is None:
                return None
            task_id, generation, lease_until = got
            self.held[actor] = generation
            if task_id != TASK_ID:
                result.errors.append(f"claim returned task {task_id!r}, only {TASK_ID!r} exists")
            if not same(t + self.lease, lease_until):
                result.errors.append(f"claim returned lease_until {lease_until!r}, expected {t + self.lease:g}")
            return generation
        if kind == "finish":
            accepted = self._queue().finish(TASK_ID, st["with_generation"], st["outcome"], t)
            return validate_finish_result(accepted, self.queue_spec)
        if kind == "exit_and_reopen":
            queue, self.queue = self.queue, None
            if queue is not None:
                try:
                    queue.close()
                except Exception as exc:  # noqa: BLE001 - report it, and still reopen
                    result.errors.append(f"close() raised {one_line(exc)}")
            self.queue = open_queue(self.queue_spec, self.db_path, self.factory)
            return None
        if kind == "external_action":
            generation = self.held.get(actor, st["generation"])
            action = self.ledger.act(TASK_ID, generation, worker=actor, lose_reply=bool(st["response_lost"]), t=t)
            return "timeout" if action.reply == "lost" else action.count
        raise ValueError(f"unknown step {kind!r} in the scenario data")

    def _observe(self, result: StepResult) -> None:
        obs = result.observed
        obs.update(state=None, generation=None, lease_until=None)
        if "ledger_actions" in result.spec:
            obs["ledger_actions"] = self.ledger.performed_count(TASK_ID)
        try:
            rows = validate_snapshot(self._queue().snapshot(), self.queue_spec)
        except Exception as exc:  # noqa: BLE001
            result.errors.append(f"snapshot: {one_line(exc)}")
            return
        mine = [r for r in rows if r[0] == TASK_ID]
        others = [r[0] for r in rows if r[0] != TASK_ID]
        if others:
            result.errors.append(f"snapshot() lists unknown tasks {others[:3]!r}")
        if len(mine) != 1:
            result.errors.append(f"snapshot() lists task {TASK_ID!r} {len(mine)} times, expected once")
            if not mine:
                return
        _task, obs["state"], obs["generation"], obs["lease_until"] = mine[0]


def run_scenario(
    scenario: dict[str, Any], queue_spec: str, factory: QueueFactory, lease: float
) -> ScenarioResult:
    """Replay one scenario in its own temporary folder, removed afterwards whatever happens."""
    workdir = Path(tempfile.mkdtemp(prefix=f"takeover-{scenario['id']}-"))
    try:
        replay = _Replay(queue_spec, factory, workdir, lease)
        try:
            steps = []
            for i, st in enumerate(scenario["steps"], start=1):
                step = StepResult(index=i, spec=st)
                replay.run_step(step)
                steps.append(step)
            result = ScenarioResult(id=scenario["id"], spec=scenario, steps=steps)
            try:
                result.final_ledger_actions = replay.ledger.performed_count(TASK_ID)
            except Exception as exc:  # noqa: BLE001
                result.ledger_error = one_line(exc)
            return result
        finally:
            replay.close()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def run_scenarios(queue_spec: str, only: list[str] | None = None) -> list[ScenarioResult]:
    """Replay the chosen scenarios (all by default) against ``queue_spec`` (``MODULE:ATTR``).

    Raises :class:`UsageError` (exit 2) for a queue that cannot be loaded, built or does not offer
    the contract, and for an unknown scenario id.
    """
    spec = load_spec()
    known = scenario_ids(spec)
    wanted = [s.upper() for s in only] if only else known
    unknown = [s for s in wanted if s not in known]
    if unknown:
        raise UsageError(f"unknown scenario {unknown[0]!r}; choose from {', '.join(known)}")
    factory = load_queue_factory(queue_spec)
    lease = float(spec["lease_seconds"])
    return [
        run_scenario(sc, queue_spec, factory, lease) for sc in spec["scenarios"] if sc["id"] in wanted
    ]


def results_to_json(results: list[ScenarioResult], queue_spec: str) -> dict[str, Any]:
    spec = load_spec()
    return {
        "queue": queue_spec,
        "lease_seconds": spec["lease_seconds"],
        "ok": all(r.ok for r in results),
        "scenarios": [r.to_json() for r in results],
    }
