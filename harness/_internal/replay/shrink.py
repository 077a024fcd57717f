"""Shrinking a replayed sequence to the smallest one that still breaks the same promise.

In the order Hypothesis shrinks, because a short scenario is one a person can read at a glance:

1. **fewest calls**: cut everything after the first break, then delete chunks of steps, halves
   first, then smaller ones, down to single steps, until no deletion keeps the break (delta
   debugging), and lower the generations the calls pass where that still breaks it (so the claims
   that led up to a large one can go too); every candidate is a real replay of the queue;
2. **fewest actors**: give one actor's steps to another wherever the break stays (only a claim
   passes the actor to the queue, as its worker name);
3. **small numbers**: put the clock on whole numbers with the smallest lease that allows it (each
   step at the earliest time that keeps its answers: t = 0, 1, 2, ...), name the actors A, B, C and
   the task ``task``, each only where every answer of the queue, and every departure, stays exactly
   the same as before.

The result is deterministic: the candidates are tried in a fixed order and the queue runs in one
process on a fresh file each time.
"""

from __future__ import annotations

import math
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from takeover._internal.replay.judge import Outcome, Replayer
from takeover._internal.scenario.engine import TASK_ID
from takeover._internal.scenario.overlap import PAUSABLE

Steps = list[dict[str, Any]]
LEASES = (1, 2, 3, 4, 5, 10, 20, 30, 60, 100, 1000)  # the small integer leases tried, smallest first


@dataclass
class Shrunk:
    task: str
    lease: float
    steps: Steps
    outcome: Outcome
    replays: int  # replays the shrinking ran


def shrink(replayer: Replayer, task: str, lease: float, steps: Steps, invariant: str) -> Shrunk:
    """The smallest sequence found that still makes the queue break ``invariant``."""
    before = replayer.runs

    def breaks(candidate: Steps, t: str = task, lz: float = lease) -> bool:
        return bool(candidate) and replayer.run(t, lz, candidate).breaks(invariant)

    steps = _truncate(replayer, task, lease, steps, invariant)
    while True:
        steps = _delete_chunks(steps, breaks)
        lower = _delete_claims_renumbered(_lower_generations(steps, breaks), breaks)
        if lower == steps:
            break
        steps = lower
    steps = _merge_actors(steps, breaks)
    steps = whole_overlaps(steps)
    task, lease, steps = _small_numbers(replayer, task, lease, steps)
    outcome = replayer.run(task, lease, steps)
    return Shrunk(task, lease, steps, outcome, replayer.runs - before)


def _truncate(replayer: Replayer, task: str, lease: float, steps: Steps, invariant: str) -> Steps:
    """Nothing after the first step that breaks it can be needed."""
    first = replayer.run(task, lease, steps).first(invariant)
    return steps[: first.index] if first is not None else steps


def _delete_chunks(steps: Steps, breaks: Callable[[Steps], bool]) -> Steps:
    size = max(1, len(steps) // 2)
    while True:
        changed = False
        i = len(steps) - size
        while i >= 0:
            candidate = steps[:i] + steps[i + size:]
            if breaks(candidate):
                steps = candidate
                changed = True
            i = min(i - 1, len(steps) - size)
        if size == 1 and not changed:
            return steps
        if not changed:
            size = max(1, size // 2)


def _lower_generations(steps: Steps, breaks: Callable[[Steps], bool]) -> Steps:
    """The generations finish, extend and resolve pass, each as small as still breaks it: a
    smaller one lets the claims that led up to a large one be deleted in the next round. Never
    below 1, a generation a claim can give: a finish of generation 0 would show a different bug
    (one that accepts any number) than the stale holder the run had."""
    for i, st in enumerate(steps):
        if "with_generation" not in st:
            continue
        for smaller in range(1, st["with_generation"]):
            candidate = steps[:i] + [dict(st, with_generation=smaller)] + steps[i + 1:]
            if breaks(candidate):
                steps = candidate
                break
    return steps


def _delete_claims_renumbered(steps: Steps, breaks: Callable[[Steps], bool]) -> Steps:
    """A claim deleted together with one off every later generation a call passes: the two moves
    only work as one (without the claim, a finish of generation 2 has nobody's lease to end)."""
    i = len(steps) - 1
    while i >= 0:
        if steps[i]["step"] == "claim":
            later = [dict(st, with_generation=st["with_generation"] - 1)
                     if st.get("with_generation", 0) > 1 else st for st in steps[i + 1:]]
            candidate = steps[:i] + later
            if breaks(candidate):
                steps = candidate
        i = min(i - 1, len(steps) - 1)
    return steps


def _actors(steps: Steps) -> list[str]:
    return list(dict.fromkeys(st["actor"] for st in steps if st.get("actor") is not None))


def _rename(steps: Steps, names: dict[str, str]) -> Steps:
    return [dict(st, actor=names.get(st["actor"], st["actor"])) if st.get("actor") is not None else st
            for st in steps]


def _merge_actors(steps: Steps, breaks: Callable[[Steps], bool]) -> Steps:
    changed = True
    while changed:
        changed = False
        actors = _actors(steps)
        for keep in actors:
            for other in actors:
                if other == keep or actors.index(other) < actors.index(keep):
                    continue
                candidate = _rename(steps, {other: keep})
                if breaks(candidate):
                    steps, changed = candidate, True
                    break
            if changed:
                break
    return steps


def _with_times(steps: Steps, times: list[float], scale: float = 1.0) -> Steps:
    out = []
    for st, t in zip(steps, times, strict=True):
        new = dict(st, t=t)
        if "lease" in st:
            new["lease"] = st["lease"] * scale
        out.append(new)
    return out


def _small_numbers(replayer: Replayer, task: str, lease: float, steps: Steps) -> tuple[str, float, Steps]:
    same_as = replayer.run(task, lease, steps).signature

    def same(t: str, lz: float, candidate: Steps) -> bool:
        return replayer.run(t, lz, candidate).signature == same_as

    for small in LEASES:
        candidate = _greedy_times(replayer, task, small, steps, same_as)
        if candidate is not None:
            steps, lease = candidate, small
            break
    else:
        t0 = float(steps[0]["t"]) if steps else 0.0
        rel = [float(st["t"]) - t0 for st in steps]
        for candidate in (_with_times(steps, [round(r, 3) for r in rel]), _with_times(steps, rel)):
            if same(task, lease, candidate):
                steps = candidate
                break
    names = {a: _letter(n) for n, a in enumerate(_actors(steps))}
    candidate = _rename(steps, names)
    if same(task, lease, candidate):
        steps = candidate
    if task != TASK_ID and same(TASK_ID, lease, steps):
        task = TASK_ID
    return task, lease, steps


def _greedy_times(replayer: Replayer, task: str, lease: int, steps: Steps,
                  same_as: tuple[Any, ...]) -> Steps | None:
    """Whole-number times for a lease of ``lease``: each step at the earliest time, from the one
    before it on, at which the replay up to that step answers exactly as before; None when some
    step has no such time. Only times up to one past the latest lease given can differ (after it
    every lease has run out, as later), so the search per step is short."""
    if any("lease" in st for st in steps):
        return None  # a step with its own lease: its scale is not the scenario's
    out: Steps = []
    t_prev = 0
    expiries: list[int] = []
    for i, st in enumerate(steps):
        bound = max([t_prev, *expiries]) + 1
        for t in range(t_prev, bound + 1):
            candidate = [*out, dict(st, t=t)]
            if replayer.run(task, lease, candidate).signature == same_as[: i + 1]:
                out, t_prev = candidate, t
                break
        else:
            return None
        if st["step"] in ("claim", "extend"):
            expiries.append(t_prev + lease)
    return out


def whole_overlaps(steps: Steps) -> Steps:
    """The steps with a pause no gap call and resume follow made a plain call, and a resume no pause comes
    before dropped: what the scenario engine did with them anyway (takeover._internal.scenario.overlap.group_at), now
    written so the scenario file says it."""
    out: Steps = []
    for i, st in enumerate(steps):
        paused = "pause_before_statement" in st
        whole = (paused and i + 2 < len(steps) and steps[i + 2]["step"] == "resume"
                 and "pause_before_statement" not in steps[i + 1] and steps[i + 1]["step"] in PAUSABLE)
        if paused and not whole:
            st = {k: v for k, v in st.items() if k != "pause_before_statement"}
        if st["step"] == "resume" and not (len(out) >= 2 and "pause_before_statement" in out[-2]):
            continue
        out.append(st)
    return out


def drop_default_lease(steps: Steps, lease: float) -> Steps:
    """A step's own lease is written only where it differs from the scenario's."""
    return [{k: v for k, v in st.items() if not (k == "lease" and math.isclose(v, lease))} for st in steps]


def _letter(n: int) -> str:
    letters = string.ascii_uppercase
    return letters[n] if n < len(letters) else f"W{n}"
