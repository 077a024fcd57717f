"""``analyse``: a stored run folder in, a :class:`CheckResult` out; nothing written, nothing printed.

Why the checker stops at a typed result: writing ``summary.json``, drawing the reports and printing
the verdict are the caller's steps (:func:`takeover._internal.pipeline.check_and_report` does all three), so
the checker depends on nothing but the run folder, and the reports take what it concluded rather
than reaching back into it.
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from takeover._internal.checker import network, well_formed
from takeover._internal.checker.counts import counts, coverage, warnings
from takeover._internal.checker.diagnosis import Diagnosis, diagnose
from takeover._internal.checker.duplicate_causes import duplicates, extra_actions
from takeover._internal.checker.facts import Facts, build_facts
from takeover._internal.checker.gate import Gate, judge
from takeover._internal.checker.invariant_result import InvariantResult
from takeover._internal.checker.invariants import check_invariants
from takeover._internal.checker.load import load_run
from takeover._internal.checker.model_coverage import model_coverage
from takeover._internal.checker.power import power_loss
from takeover._internal.checker.remedies import feature_sections
from takeover._internal.checker.verdict import broken_adapter, combine, damaged_reason, exit_code, inconclusive_reason
from takeover._internal.checker.well_formed import answers_well_formed
from takeover.exit_codes import ExitCode
from takeover.summary_types import NOT_JUDGED, UNKNOWN, Example, Summary, Verdict

CONFIG_KEYS = ("queue", "db", "redis_persistence", "seed", "profile", "workers", "tasks", "duration", "lease",
               "remedy", "heartbeat", "faults", "command")


@dataclass(frozen=True)
class CheckResult:
    """What one check concluded about one run folder.

    ``summary`` is exactly what ``summary.json`` holds; the other fields are what the reports need
    beyond it (the parsed frames for the figures, the invariants' task lists) and the two values
    every caller acts on.
    """

    run_dir: Path
    verdict: Verdict  # summary["valid"]
    exit_code: ExitCode  # summary["exit_code"]: VALID, VIOLATED (or duplicates with --fail-on-duplicates), INCONCLUSIVE
    summary: Summary
    invariants: dict[str, InvariantResult]
    facts: Facts
    duplicate_tasks: list[float]  # codes of the tasks whose side effect was performed more than once
    # Every violation of every invariant, one row each, with its pattern (violations.csv); empty when valid.
    violations: list[Example] = field(default_factory=list)

    def first_violation(self, names: list[str]) -> tuple[float | None, bool]:
        """When the first of ``names`` (violated invariants) was first broken, in seconds from the run's
        ``run start`` record (its faulted phase starts there), and whether that is only the run's end.

        The earliest violating operation (:attr:`InvariantResult.first_at`) where there is one; a violation
        that only the final snapshot shows has none, and counts with the time of the ``run drain_end``
        record (the snapshot is taken right after it; the run's last record when there is none), since
        that is when the evidence exists (then True). None when ``names`` is empty. The detection bench,
        hunt and mutate time a catch with it.
        """
        if not names:
            return None, False
        fx = self.facts
        start = self._mark("start", fx.t0)
        times = [t for n in names if (t := self.invariants[n].first_at) is not None]
        if times:
            return round(min(times) - start, 3), False
        return round(self._mark("drain_end", fx.t1) - start, 3), True

    def _mark(self, value: str, default: float) -> float:
        """Seconds from the run's first record to its ``run <value>`` record (``default``, a record
        time, when the history has none)."""
        fx = self.facts
        marks = fx.ops.run_events
        times = marks.loc[marks["value"] == value, "time"]
        rel = fx.rel(float(times.iloc[0]) if len(times) else default)
        return 0.0 if rel is None else float(rel)


def analyse(run_dir: str | Path, *, fail_on_duplicates: bool = False,
            max_duplicates_per_1000: float | None = None) -> CheckResult:
    """The whole check of a stored run, without writing anything. The two duplicate options are the
    gate of takeover._internal.checker.gate: which duplicates fail the run besides its invariants."""
    # The cyclic GC off while checking: loading the snapshot and the ledger allocates a few hundred
    # thousand lists and tuples, and each burst of allocations set off collections that walked every
    # live object (a fifth of their load time). The check makes next to no cycles; the collector
    # is back on, in its previous state, as soon as it returns.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _analyse(run_dir, Gate(fail_on_duplicates, max_duplicates_per_1000))
    finally:
        if was_enabled:
            gc.enable()


def _analyse(run_dir: str | Path, gate: Gate) -> CheckResult:
    started = time.perf_counter()
    run = load_run(run_dir)
    fx = build_facts(run)
    results = check_invariants(fx)
    broken = broken_adapter(run.history)
    diagnosis = diagnose(fx, results)
    if broken is not None:  # no sentence on the queue's semantics built on a broken wire
        diagnosis = Diagnosis(diagnosis.rows, [])
    answers, short_leases = answers_well_formed(fx)
    if answers is not None:  # listed only when violated: a run with well-formed answers keeps its summary
        results = {answers.name: answers, **results}
        diagnosis = well_formed.qualify(diagnosis, answers)
    cnt = counts(fx)
    extra = extra_actions(fx)
    dup, dup_tasks = duplicates(fx, extra)
    cov = coverage(fx)
    cov["model"] = model_coverage(fx)
    warn = warnings(fx, cov, dup)
    if short_leases is not None:  # named, not judged: see takeover._internal.checker.well_formed.SHORT
        warn = [*warn, short_leases]
    why = broken or inconclusive_reason(cnt, run.stats.lines)
    damaged = damaged_reason(run.stats.lines, set(fx.ops.run_events["value"].astype(object).dropna()))
    if damaged is not None:  # nothing judged on a damaged history: every rule says so, and why
        why = damaged
        results = {name: InvariantResult(name, UNKNOWN, 0, [], note=NOT_JUDGED) for name in results}
        diagnosis = Diagnosis([], [])
    valid = combine(results, why, adapter_broke=broken is not None)
    if valid is False and why is not None:  # a violation was found all the same: say so as a warning, not as
        warn = [*warn, f"{why} (yet an invariant is violated)"]  # "inconclusive" beside an INVALID verdict
        why = None
    judged = judge(fx, extra, cnt["tasks"], gate) if gate.requested else None
    dup_fail = bool(judged and judged["failed"])
    code = exit_code(valid, dup_fail)
    summary: Summary = {
        "valid": valid,
        "exit_code": int(code),  # summary.json holds the number, whatever json makes of an enum
        "inconclusive": why,
        "interrupted": fx.interrupted,
        "fail_on_duplicates": gate.fail_on_duplicates,
        "failed_on_duplicates": dup_fail,
        "run_dir": str(run.run_dir),
        "config": {k: run.config[k] for k in CONFIG_KEYS if k in run.config},
        "invariants": {name: r.to_json() for name, r in results.items()},
        "duplicates": dup,
        "counts": cnt,
        "coverage": cov,
        "warnings": warn,
        **feature_sections(fx),
        "history": {"lines": run.stats.lines, "torn_tail": run.stats.torn_tail,
                    "corrupt_lines": run.stats.corrupt_lines,
                    "corrupt_examples": list(run.stats.corrupt_examples)},
        "check_seconds": round(time.perf_counter() - started, 3),
    }
    if judged is not None:  # last, so a summary checked without a gate keeps its keys and their order
        summary["duplicate_gate"] = judged
    power = power_loss(fx, diagnosis.rows, extra)
    if power is not None:  # only in runs with power losses, so other runs keep their keys
        items = list(summary.items())
        at = [k for k, _ in items].index("history")
        summary = cast("Summary", dict([*items[:at], ("power_loss", power), *items[at:]]))
    net = network.section(fx, extra, diagnosis.rows)
    if net is not None:  # only in runs with hosts, so other runs keep their keys
        items = list(summary.items())
        at = [k for k, _ in items].index("history")
        summary = cast("Summary", dict([*items[:at], ("network", net), *items[at:]]))
    if diagnosis.entries:  # right after the invariants it explains; absent from a valid run's summary
        items = list(summary.items())
        at = [k for k, _ in items].index("invariants") + 1
        summary = cast("Summary", dict([*items[:at], ("diagnosis", diagnosis.entries), *items[at:]]))
    return CheckResult(run.run_dir, valid, code, summary, results, fx, dup_tasks, diagnosis.rows)
