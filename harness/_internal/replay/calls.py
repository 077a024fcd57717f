"""One task's queue calls, rebuilt from a run's history, and the ways they can be put in one line.

Why from the checker's view of the history: the checker has already paired every invoke with its
completion (``takeover._internal.checker.ops``), by the rules docs/history.md sets out (batched registers, a
process killed mid-call); reading the operations from its :class:`~takeover._internal.checker.facts.Facts`
means the replay sees the same calls the verdict was built on.

What cannot be known from the history is settled by trying, in a fixed order (so the answer is the
same every time):

* **order**: real processes overlap, so the calls are put in the order of their ``now`` (the clock
  the queue judged them by, so the replay's clock never runs back), then in the order they were
  invoked, then in the order they returned;
* **indeterminate calls** (an ``info`` completion, or an invoke whose process died mid-call) may
  or may not have reached the queue: both ways are tried, all of them first, then none, then each
  one alone either way;
* **claims that named no task**: a claim killed mid-call took *some* task, perhaps this one; it
  matters only where the task's generations jump, so one is put into each such gap.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from takeover._internal.checker.facts import Facts
from takeover._internal.checker.resolves import resolves

MAX_VARIANTS = 24  # placements tried per task; more add seconds and almost never a new answer
FULL_ENUMERATION = 4  # up to this many indeterminate calls, every subset is tried


@dataclass(frozen=True)
class Call:
    """One queue call on the task, with what the history says about it."""

    kind: str  # register, claim, finish, extend, resolve
    now: float
    actor: str | None  # the worker name claims passed (None: the coordinator)
    process: int
    status: str  # ok, fail, info, open (no completion: killed mid-call)
    recorded: Any  # the answer the run saw: a claim's generation, a finish's bool, ...; None if unknown
    t_inv: float
    t_comp: float  # NaN when the call never returned
    inputs: tuple[tuple[str, Any], ...] = ()  # with_generation, outcome, lease
    probe: bool = False  # a claim that took some other task or none: kept to ask the queue about this one

    @property
    def indeterminate(self) -> bool:
        return self.status in ("info", "open")

    def step(self) -> dict[str, Any]:
        """The call as a scenario step (no expectations)."""
        out: dict[str, Any] = {"t": self.now, "actor": self.actor, "step": self.kind}
        out.update(self.inputs)
        return out


@dataclass
class TaskCalls:
    """Every recorded call on one task, and the claims of unknown outcome that might have taken it."""

    task: str
    calls: list[Call]
    unknown_claims: list[Call] = field(default_factory=list)  # claims that named no task (info/open)
    lease: float = 1.0

    @property
    def indeterminate(self) -> list[Call]:
        return [c for c in self.calls if c.indeterminate]

    def overlapping(self) -> list[tuple[Call, Call]]:
        """Pairs of calls in flight at the same time (one invoked before the other returned): a
        single process can only run them one after the other."""
        out = []
        ordered = sorted(self.calls, key=lambda c: c.t_inv)
        for i, a in enumerate(ordered):
            end_a = math.inf if math.isnan(a.t_comp) else a.t_comp
            for b in ordered[i + 1:]:
                if b.t_inv >= end_a:
                    break
                if a.kind != "register" or b.kind != "register":
                    out.append((a, b))
        return out

    def variants(self) -> list[tuple[str, list[Call]]]:
        """The placements to try, in order, each a name and the calls in their replay order."""
        ind = self.indeterminate
        inclusions: list[tuple[str, frozenset[Call]]] = [("all", frozenset(ind))]
        if ind:
            inclusions.append(("none", frozenset()))
            if len(ind) <= FULL_ENUMERATION:
                for n in range(1, len(ind)):
                    for combo in itertools.combinations(ind, n):
                        inclusions.append(("some", frozenset(combo)))
            else:
                for c in ind:
                    inclusions.append(("only one", frozenset([c])))
                    inclusions.append(("all but one", frozenset(ind) - {c}))
        fillers = self._gap_fillers()
        if fillers:
            inclusions.append(("with killed claims in the generation gaps", frozenset(ind) | frozenset(fillers)))
        out: list[tuple[str, list[Call]]] = []
        seen: set[tuple[Call, ...]] = set()
        for order_name, key in _ORDERS:
            for name, chosen in inclusions:
                calls = [c for c in self.calls + fillers if not c.indeterminate or c in chosen]
                calls.sort(key=key)
                sig = tuple(calls)
                if sig in seen:
                    continue
                seen.add(sig)
                label = f"{order_name}, indeterminate calls: {name}" if ind else order_name
                if fillers and name.startswith("with"):
                    label = f"{order_name}, {name}"
                out.append((label, calls))
                if len(out) >= MAX_VARIANTS:
                    return out
        return out

    def _gap_fillers(self) -> list[Call]:
        """One claim of unknown outcome per generation the task's claims skipped, invoked between the
        claim before the gap and the one after it (the latest such claim: the likeliest taker)."""
        taken = sorted((c for c in self.calls if c.kind == "claim" and c.status == "ok" and not c.probe),
                       key=lambda c: c.t_inv)
        out: list[Call] = []
        prev_gen, prev_inv = 0, -math.inf
        for c in taken:
            missing = int(c.recorded) - prev_gen - 1
            if missing > 0:
                end = c.t_comp if not math.isnan(c.t_comp) else c.t_inv
                window = [u for u in self.unknown_claims if prev_inv <= u.t_inv <= end and u not in out]
                out.extend(window[-missing:])
            prev_gen, prev_inv = max(prev_gen, int(c.recorded)), c.t_inv
        return out


_ORDERS = (
    ("in the order of their now", lambda c: (c.now, c.t_inv)),
    ("in the order they were invoked", lambda c: (c.t_inv, c.now)),
    ("in the order they returned", lambda c: (c.t_comp if not math.isnan(c.t_comp) else math.inf, c.t_inv)),
)


def _f(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _workers(fx: Facts) -> dict[int, str]:
    """Process number -> the worker name it ran as (the name its claims passed)."""
    out: dict[int, str] = {}
    spawns = fx.ops.spawns
    for target, worker in zip(spawns["target"].to_numpy(), spawns["worker"].to_numpy(dtype=object), strict=True):
        if not pd.isna(target) and isinstance(worker, str):
            out[int(target)] = worker
    claims = fx.ops.claims
    for process, worker in zip(claims["process"].to_numpy(), claims["worker"].to_numpy(dtype=object), strict=True):
        if isinstance(worker, str):
            out.setdefault(int(process), worker)
    return out


def _actor(process: int, workers: dict[int, str]) -> str | None:
    return None if process <= 0 else workers.get(process, f"p{process}")


def _status(value: Any) -> str:
    return str(value) if isinstance(value, str) else "open"


def task_calls(fx: Facts, task: str, *, probe_empty: bool = False) -> TaskCalls:
    """Every call on ``task`` in the run, plus (``probe_empty``, for a task no claim took) the first
    claim that passed it over while it was pending: the run's evidence that it was never claimable."""
    code = fx.code(task)
    lease = fx.lease if fx.lease is not None else 1.0
    workers = _workers(fx)
    calls: list[Call] = []
    ops = fx.ops

    def rows(frame: pd.DataFrame) -> pd.DataFrame:
        return frame[frame["task"].to_numpy(dtype="float64") == code]

    for r in rows(ops.registers).itertuples():
        calls.append(Call("register", _f(r.now), _actor(int(r.process), workers), int(r.process),
                          _status(r.status), None, _f(r.t_inv), _f(r.t_comp)))
    claims = ops.claims
    mine = claims[(claims["status"] == "ok") & (claims["task"].to_numpy(dtype="float64") == code)]
    for r in mine.itertuples():
        calls.append(Call("claim", _f(r.now), _actor(int(r.process), workers) or "coordinator", int(r.process),
                          "ok", int(r.gen), _f(r.t_inv), _f(r.t_comp), (("lease", lease),)))
    for r in rows(ops.finishes).itertuples():
        recorded: Any = True if r.accepted else False if r.rejected else None
        calls.append(Call("finish", _f(r.now), _actor(int(r.process), workers), int(r.process), _status(r.status),
                          recorded, _f(r.t_inv), _f(r.t_comp),
                          (("outcome", str(r.outcome)), ("with_generation", int(r.gen)))))
    for r in rows(ops.extends).itertuples():
        status = _status(r.status)
        recorded = _f(r.lease_until_c) if status == "ok" else None
        calls.append(Call("extend", _f(r.now), _actor(int(r.process), workers), int(r.process), status, recorded,
                          _f(r.t_inv), _f(r.t_comp), (("with_generation", int(r.gen)), ("lease", lease))))
    res = resolves(fx)
    for r in res[res["task"].to_numpy(dtype="float64") == code].itertuples():
        status = _status(r.status)
        recorded = True if status == "ok" else False if status == "fail" else None
        # A resolve's ``now`` is not kept by the checker's pairing; its invoke time is the same clock.
        calls.append(Call("resolve", _f(r.t_inv), None, 0, status, recorded, _f(r.t_inv), _f(r.t_comp),
                          (("outcome", str(r.resolution)), ("with_generation", int(r.gen)))))
    calls = [c for c in calls if not math.isnan(c.now)]
    unknown = claims[claims["indeterminate"].to_numpy(dtype=bool) & claims["task"].isna().to_numpy(dtype=bool)]
    unknown_claims = [
        Call("claim", _f(r.now), _actor(int(r.process), workers) or "coordinator", int(r.process), _status(r.status),
             None, _f(r.t_inv), _f(r.t_comp), (("lease", lease),))
        for r in unknown.itertuples() if not math.isnan(_f(r.now))
    ]
    if probe_empty:
        calls.extend(_probe(fx, calls, claims, code, workers, lease))
    calls.sort(key=lambda c: (c.t_inv, c.now))
    return TaskCalls(task, calls, unknown_claims, lease)


def _probe(fx: Facts, calls: list[Call], claims: pd.DataFrame, code: float, workers: dict[int, str],
           lease: float) -> list[Call]:
    """For a task no claim ever took: the first claim, while it was pending, that came back empty or
    with a task registered after it (a correct queue may hand out older tasks first, so those prove
    nothing); a one-task replay asks the queue the same question."""
    if any(c.kind == "claim" for c in calls):
        return []
    registered = [c.t_comp for c in calls if c.kind == "register" and c.status == "ok"]
    if not registered:
        return []
    start = min(registered)
    regs = fx.ops.registers
    first_reg = regs.groupby("task", sort=False)["t_inv"].min()
    done = claims[(claims["status"].isin(["ok", "fail"])).to_numpy(dtype=bool)]
    t_inv = done["t_inv"].to_numpy(dtype="float64")
    later = done["task"].map(first_reg).to_numpy(dtype="float64") > start
    pick = np.flatnonzero((t_inv > start) & (done["task"].isna().to_numpy(dtype=bool) | later))
    if not len(pick):
        return []
    r = done.iloc[int(pick[0])]
    recorded = None if pd.isna(r["task"]) else fx.name(r["task"])
    return [Call("claim", _f(r["now"]), _actor(int(r["process"]), workers) or "coordinator", int(r["process"]),
                 str(r["status"]), recorded, _f(r["t_inv"]), _f(r["t_comp"]), (("lease", lease),), probe=True)]
