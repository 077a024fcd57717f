"""Explore's step of two calls at once: one actor's call paused inside itself, before one of its own
database statements, while another actor's call runs in the gap (the mechanics:
:mod:`takeover._internal.scenario.overlap`).

Why: the bugs a stress run finds only by luck (a claim that reads and writes in two transactions, a
transaction that takes SQLite's write lock only at its first write) answer every one-call-after-another
sequence right; they break only when a call lands between another call's statements. Here that moment
is drawn like any other step, so Hypothesis finds and shrinks it, deterministically from the seed.

How the pair is judged: as linearizability asks of two calls that were under way at once. Either may
have taken effect first, so the answers and the snapshot read after both are the spec's if the model,
applying them in *some* order (the paused call then the gap call, or the reverse), gives them. When
neither order does, the departure is named by the order that went further before departing (ties: the
order the calls returned in, the likelier commit order): a claim that took a task another claim took in
the gap is ``lease_exclusive``, not a vague "no order fits". When the paused call ended before the
statement it was to stop at, the calls did not overlap and only its order is admissible.

A call that raises while another is under way is a departure ("raised under contention"), as it is
anywhere in explore: the contract gives a call no error to answer with, and a production worker meets
the same error whenever two workers call at once. The queue that spins or waits on its busy handler for
the lock gives the spec's answer a few milliseconds later; one whose deferred transaction fails at once
with "database is locked" would fail a worker's finish, and the lease with it.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from takeover._internal.explorer.calls import (
    WEIGHTS,
    MachineParts,
    Step,
    expected_words,
    judge_call,
    snapshot_check,
    weighted,
)
from takeover._internal.explorer.coverage import op_of
from takeover._internal.replay.model import SPEC, TaskState
from takeover._internal.scenario.overlap import PAUSABLE, Overlap, run_overlap
from takeover._internal.scenario.results import StepResult

GAP_CALLS = 5  # the gap call is given this many typical calls' time before the parked call is released
GAP_MIN, GAP_MAX = 0.01, 0.2  # seconds, whatever the typical call takes
SAME_KIND = 3  # how much likelier the gap call is of the paused call's kind
SEVERAL = 4  # how much likelier the paused call is of a kind that issues several statements


@dataclass
class Judged:
    """One order's reading of the pair: the model after it, and how far it got before departing."""

    order: tuple[StepResult, ...]
    states: dict[str, TaskState]
    lines: list[tuple[str, str, str | None, tuple[str, str, int] | None]] = field(default_factory=list)
    reached: int = 0  # calls (then the snapshot: one more) that were the spec's before the first departure
    names: list[str] = field(default_factory=list)
    words: str = ""


def gap_wait(pace: list[float]) -> float:
    """How long the gap call may take before the parked call is released: a few typical calls."""
    typical = statistics.median(pace) if pace else GAP_MAX / GAP_CALLS
    return min(GAP_MAX, max(GAP_MIN, GAP_CALLS * typical))


def situation(ov: Overlap) -> str:
    """The overlap in the words of the coverage cells: ``finish_done@2/locked/claim`` is a finish (done)
    paused before its statement 2 while holding SQLite's write lock, a claim in the gap (``unlocked``: no
    write lock; ``ended``: the call issued fewer statements and returned first)."""
    return f"{op_of(ov.paused.spec)}@{ov.pause}/{ov.stood}/{op_of(ov.gap.spec)}"


def read(before: dict[str, TaskState], order: tuple[StepResult, ...], ov: Overlap, lease: float) -> Judged:
    """The pair read in one order by the model, from ``before``."""
    j = Judged(order, dict(before))
    departed = False
    for r in order:
        hang = ov.hung if r.hung else None
        answered, names, words, task, held = judge_call(j.states, r.spec, r, hang, lease)
        if names and SPEC in names and (hang is not None or r.observed.get("raised") is not None):
            words = f"{words} (raised under contention: {_other(r, ov)})"
        j.lines.append((answered, words, task, held))
        if names and not departed:
            departed, j.names, j.words = True, names, words
        elif not departed:
            j.reached += 1
    if not departed and ov.hung is None:
        j.names, j.words = snapshot_check(j.states, ov.gap)
        j.reached += 0 if j.names else 1
    return j


def _other(r: StepResult, ov: Overlap) -> str:
    other = ov.gap if r is ov.paused else ov.paused
    where = ("paused" if other is ov.paused else "in the gap")
    return f"while {other.spec.get('actor') or 'a producer'}'s {other.spec['step']} was under way ({where})"


class OverlapRules(MachineParts):
    """Two calls at once, a rule of several calls mixed into the machine (takeover._internal.explorer.machine)."""

    def overlap_step(self, data: st.DataObject) -> None:
        """Draw a call to pause, the statement to pause it before, and a call for the gap; run and judge."""
        kinds = [k for k in PAUSABLE if self._can(k)]
        weights = [WEIGHTS[k] for k in kinds]
        # A call of one statement paused before it is only the gap call made first, which the sequential steps
        # show too: the calls that issue several statements, where another call can land between two, lean in.
        statements = self.setup.statements
        between = [w * (SEVERAL if statements.get(k, 1) > 1 else 1) for k, w in zip(kinds, weights, strict=True)]
        first = weighted(data, kinds, between, "paused call")
        paused = self._call_spec(first, data)
        count = statements.get(first, 1)
        pause = 1 if count < 2 else data.draw(st.integers(2, count), label="pause before statement")
        paused["pause_before_statement"] = pause
        # The gap call leans toward the paused call's kind: two claims, two finishes, two registers contend for
        # the same rows, and two calls of one kind are where a check-then-act breaks.
        leaned = [w * (SAME_KIND if k == first else 1) for k, w in zip(kinds, weights, strict=True)]
        gap = self._call_spec(weighted(data, kinds, leaned, "call in the gap"), data)
        rec = self.setup.recorder
        rec.steps += 2
        a = StepResult(index=len(self.steps) + 1, spec=paused)
        b = StepResult(index=len(self.steps) + 2, spec=gap)
        ov = run_overlap(self.live, a, pause, b, gap_wait(list(rec.pace)))
        self.overlaps[situation(ov)] += 1
        self.judge_pair(ov)

    def _call_spec(self, kind: str, data: st.DataObject) -> dict[str, Any]:
        spec = getattr(self, f"_{kind}")(data)
        return {"t": self.t, "actor": spec.pop("actor", None), **spec}

    def judge_pair(self, ov: Overlap) -> None:
        """Keep the order that is the spec's (or went furthest), its model and its steps; depart when none is."""
        lease = self.setup.lease
        before = dict(self.states)
        orders = [(ov.paused, ov.gap), (ov.gap, ov.paused)] if ov.overlapped else [(ov.paused, ov.gap)]
        if ov.gap_first:
            orders.reverse()
        readings = [read(before, o, ov, lease) for o in orders]
        best = max(readings, key=lambda j: j.reached)  # the first of equals: the order the calls returned in
        expect_states = dict(before)
        expected: dict[int, str] = {}
        for r in best.order:  # what the model expects of each call in that order
            expected[id(r)] = expected_words(expect_states, r.spec, lease)
            judge_call(expect_states, r.spec, r, ov.hung if r.hung else None, lease)
        lines = {id(r): line for r, line in zip(best.order, best.lines, strict=True)}
        for r in (ov.paused, ov.gap):  # kept in the order they started
            answered, _words, task, held = lines[id(r)]
            if held is not None:
                self.holdings.append(held)
            self.settle(Step(r.spec, answered, expected[id(r)], task), before)
        self.states = best.states
        paused = ov.paused.spec
        resume = {"t": ov.gap.spec["t"], "actor": paused.get("actor"), "step": "resume"}
        order = " then ".join(f"{r.spec.get('actor') or 'the producer'}'s {r.spec['step']}" for r in best.order)
        lock = "holding" if ov.point is not None and ov.point.locked else "not holding"
        where = ("it had returned first" if ov.point is None else
                 f"{lock} the write lock; {ov.statements} statement(s) in all")
        answered, expect = f"both done, read as {order} ({where})", "an order of the two calls the spec allows"
        departed = next((n for n, (_a, w, _t, _h) in enumerate(best.lines) if w and w == best.words), None)
        if departed is not None:  # the call that departed, in the order read: its answer and the model's
            r = best.order[departed]
            answered = f"{r.spec.get('actor') or 'the producer'}'s {r.spec['step']}: {best.lines[departed][0]}"
            expect = f"{expected[id(r)]} (read as {order}; {where})"
        task = next((t for _a, _w, t, _h in reversed(best.lines) if t), None)
        self.settle(Step(resume, answered, expect, task, tuple(dict.fromkeys(best.names)), best.words), before)
