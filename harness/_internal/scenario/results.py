"""What replaying a scenario concluded: each step's result (:class:`StepResult`), where a scenario hung
(:class:`Hang`), and the scenario's (:class:`ReplayedScenario`), each with its JSON and its plain lines.

Why apart from the engine (:mod:`takeover._internal.scenario.engine`): the engine drives a live queue; these are
plain values that the transcript, ``--json``, the API's ScenarioResult and the call-sequence replays
(takeover._internal.scenario.overlap, takeover._internal.replay) read, without the engine's imports (the contract, the
database).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The keys of a spec step that describe what the step does (not what it observes).
ACTION_KEYS = ("outcome", "with_generation", "lease", "response_lost", "batch", "pause_before_statement")
# What is compared, in the order mismatches are reported.
OBSERVED_KEYS = ("returns", "state", "generation", "lease_until", "ledger_actions")
SHOWN = 200  # characters of an answer (or an error's text) a line quotes: a queue may answer megabytes


def cut(text: str, limit: int = SHOWN) -> str:
    """``text`` as a line shows it: at most ``limit`` characters, with how long it was when it was longer
    (a queue that answered a 1 MB string, ten steps in a row, must not print 10 MB)."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def same(expected: Any, got: Any) -> bool:
    """Equality that tells True from 1: finish returns a bool, claim a generation (and so in a snapshot's rows)."""
    if isinstance(expected, dict) and isinstance(got, dict):
        return expected.keys() == got.keys() and all(same(v, got[k]) for k, v in expected.items())
    if isinstance(expected, list | tuple) and isinstance(got, list | tuple):
        return len(expected) == len(got) and all(same(a, b) for a, b in zip(expected, got, strict=True))
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
    hung: bool = False  # a queue call in this step did not return in time (the error says which)
    skipped: bool = False  # not run: an earlier step hung, so the queue's state is unknown

    @property
    def ok(self) -> bool:
        return not self.skipped and not self.hung and not self.errors and not self.mismatches

    def expected(self) -> dict[str, Any]:
        want = {k: self.spec[k] for k in OBSERVED_KEYS if k in self.spec}
        if self.spec.get("step") == "claim" and "task" in self.spec:  # the task a claim must hand out
            want["task"] = self.spec["task"]
        if "snapshot" in self.spec:  # every task's row: a scenario of several tasks
            want["snapshot"] = self.spec["snapshot"]
        return want

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
        if "task" in self.spec:  # a scenario of several tasks: the step's task (a claim's: the one it must get)
            out["task"] = self.spec["task"]
        for key in (*OBSERVED_KEYS, "snapshot"):
            if key in self.spec:
                out[key] = self.observed.get(key)
        out["ok"] = self.ok
        if self.skipped:
            out["skipped"] = True
            out["expected"] = self.expected()
            return out
        if not self.ok:
            out["expected"] = self.expected()
            out["mismatch"] = list(self.mismatches)
        if self.hung:
            out["hung"] = True
        if self.errors:
            out["error"] = "; ".join(self.errors)
        return out


@dataclass
class Hang:
    """Where a scenario stopped: the call that did not return, and in which step (None: opening the
    queue before the first step)."""

    call: str
    step: int | None
    timeout: float
    error: str  # the one-line message, as on the step

    def to_json(self) -> dict[str, Any]:
        return {"call": self.call, "step": self.step, "step_timeout": self.timeout, "error": self.error}


@dataclass
class ReplayedScenario:
    id: str
    spec: dict[str, Any]
    steps: list[StepResult]
    final_ledger_actions: int | None = None
    ledger_error: str | None = None
    hung: Hang | None = None  # the scenario stopped at a call that did not return

    @property
    def ledger_ok(self) -> bool:
        """The final ledger count, judged only for a scenario that ran to its end."""
        if self.hung is not None:
            return True
        want = self.spec.get("final_ledger_actions")
        return self.ledger_error is None and (want is None or want == self.final_ledger_actions)

    @property
    def ok(self) -> bool:
        return self.hung is None and self.ledger_ok and all(s.ok for s in self.steps)

    def failures(self) -> list[str]:
        """One plain line per departure (a step, the hang, the ledger): what a test prints when the
        scenario fails, without the transcript's table."""
        lines = [f"{self.id}: {self.hung.error}"] if self.hung is not None else []
        for step in self.failed_steps():
            parts = [f"{k} expected {step.spec.get(k)!r}, got {cut(repr(step.observed.get(k)))}"
                     for k in step.mismatches]
            where = f"{self.id} step {step.index} (t={step.spec['t']} {step.spec['actor'] or ''} {step.spec['step']})"
            lines.append(f"{where}: {'; '.join(parts + [cut(e) for e in step.errors])}")
        if not self.ledger_ok:
            lines.append(f"{self.id}: ledger actions expected {self.spec.get('final_ledger_actions')!r}, "
                         f"got {self.final_ledger_actions!r}")
        return lines

    def failed_steps(self) -> list[StepResult]:
        """Steps that ran and differ (a hung step included); steps not run are not departures."""
        return [s for s in self.steps if not s.ok and not s.skipped]

    def skipped_steps(self) -> list[StepResult]:
        return [s for s in self.steps if s.skipped]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "title": self.spec["title"], "ok": self.ok}
        if self.hung is not None:
            out["hung"] = self.hung.to_json()
        elif "final_ledger_actions" in self.spec:
            out["final_ledger_actions"] = self.final_ledger_actions
            if not self.ledger_ok:
                out["expected_final_ledger_actions"] = self.spec["final_ledger_actions"]
                if self.ledger_error:
                    out["ledger_error"] = self.ledger_error
        out["steps"] = [s.to_json() for s in self.steps]
        return out
