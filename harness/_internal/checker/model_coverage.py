"""Model coverage of a run: which cells of takeover._internal.coverage_space its queue calls reached, how often.

Why from the history: the run folder is the checker's only input, and the cells are situations in the
spec's model (docs/spec.md), which the history's answers let us replay. Each call is placed against
the task's state just before it (its invoke time), as the calls the queue answered before then left
it: a register makes an unknown task pending at generation 0, a claim makes it running at the
generation and lease it returned, an extend moves the lease, an accepted finish ends it, a resolve
settles it. Answers are applied at their completion, in time order; the generation never goes down
(a buggy queue's stale finish does not take it back). Indeterminate answers change nothing (nobody
knows whether they took effect); the calls themselves are still placed: a cell is about what the
queue was asked, not what it said.

Which task a call is about, and who calls: takeover._internal.coverage_space's docstring. Here, concretely: a
claim that returned a task is placed against that task (the caller's previous generation of it, if
it had one, from its own earlier claims); a claim that returned nothing against the task the caller
claimed last (a worker asking again after its task ended, or a restarted one while its old lease is
live); a claim whose answer is unknown is not placed. So in a history a claim by a caller that never
held the task lands on a leased task only when the queue handed that task out (``claim/running/never/
inside`` is a live lease given away); an explorer, which places a refused claim against its model's
task, reaches it by asking. A snapshot is every task row of each mid-run probe (probes.jsonl) and of the final snapshot,
as the queue reported it.

Everything is vectorized (one merge_asof over the calls), mirroring coverage_space.classify, which
tests/quality/test_model_coverage.py holds it to: the 1M-event check pays a fraction of a second.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from takeover._internal import coverage_space as cs
from takeover._internal.checker.counts import requested_faults
from takeover._internal.checker.facts import Facts
from takeover._internal.checker.probes import probe_operations
from takeover._internal.checker.remedies import queue_has
from takeover._internal.checker.resolves import resolves
from takeover._internal.coverage_aims import way, why_not
from takeover.summary_types import ModelCoverage

STATE_CODE = {s: n for n, s in enumerate(cs.STATES)}
ABSENT, PENDING, RUNNING = (STATE_CODE[s] for s in ("absent", "pending", "running"))
HOLDER, STALE, EXPIRED, NEVER = (cs.CALLERS.index(c) for c in ("holder", "stale", "expired", "never"))
INSIDE, EDGE, PAST, NONE = (cs.TIMES.index(t) for t in ("inside", "edge", "past", "none"))
N_CELLS = len(cs.OPS) * len(cs.STATES) * len(cs.CALLERS) * len(cs.TIMES)
CELLS = cs.cells()  # the order of the codes below: ((op * states + state) * callers + caller) * times + time


def times_of(state: np.ndarray, now: np.ndarray, lease_until: np.ndarray, tick: float) -> np.ndarray:
    """coverage_space.time_of over arrays (state codes; NaN for an unknown now or lease)."""
    out = np.full(len(state), NONE, dtype=np.int64)
    known = (state == RUNNING) & ~np.isnan(now) & ~np.isnan(lease_until)
    out[known & (now < lease_until - tick)] = INSIDE
    out[known & (now >= lease_until - tick) & (now < lease_until + tick)] = EDGE
    out[known & (now >= lease_until + tick)] = PAST
    return out


def callers_of(state: np.ndarray, caller_gen: np.ndarray, current_gen: np.ndarray, now: np.ndarray,
               lease_until: np.ndarray) -> np.ndarray:
    """coverage_space.caller_of over arrays (NaN generations: never held / no task)."""
    out = np.full(len(state), HOLDER, dtype=np.int64)
    with np.errstate(invalid="ignore"):
        never = np.isnan(caller_gen) | (caller_gen <= 0) | np.isnan(current_gen) | (caller_gen > current_gen)
        stale = ~never & ((caller_gen < current_gen) | (state == PENDING))
        expired = ~never & ~stale & (state == RUNNING) & ~np.isnan(now) & ~np.isnan(lease_until) & (now >= lease_until)
    out[expired] = EXPIRED
    out[stale] = STALE
    out[never] = NEVER
    return out


def cell_codes(op: int, state: np.ndarray, caller: np.ndarray, time: np.ndarray) -> np.ndarray:
    return ((op * len(cs.STATES) + state) * len(cs.CALLERS) + caller) * len(cs.TIMES) + time


def _effects(fx: Facts) -> pd.DataFrame:
    """Every answer that moved a task in the model: task, t (its completion), state (code; NaN: the lease
    only), gen (NaN: unchanged), lease (NaN: unchanged). Sorted by task, then t (ties in the order of
    the answers' kinds above)."""
    parts: list[tuple[Any, Any, Any, Any, Any]] = []
    reg = fx.ops.registers
    reg = reg[(reg["status"] == "ok") & reg["task"].notna()]
    if len(reg):  # the first registration of each task makes it pending; later ones change nothing
        first = reg.sort_values("t_comp").drop_duplicates("task")
        parts.append((first["task"], first["t_comp"], PENDING, 0.0, np.nan))
    c = fx.claims_ok
    parts.append((c["task"], c["t_comp"], RUNNING, c["gen"], c["lease_until"]))
    e = fx.ext_ok
    parts.append((e["task"], e["t_comp"], np.nan, np.nan, e["lease_until_c"]))
    f = fx.fin_acc
    outcome = np.where(f["outcome"].to_numpy(dtype=object) == "uncertain", STATE_CODE["uncertain"], STATE_CODE["done"])
    parts.append((f["task"], f["t_comp"], outcome, np.nan, np.nan))
    r = resolves(fx)
    r = r[(r["status"] == "ok") & r["task"].notna()]
    if len(r):
        settled = np.where(r["resolution"].to_numpy(dtype=object) == "pending", PENDING, STATE_CODE["done"])
        parts.append((r["task"], r["t_comp"], settled, np.nan, np.nan))
    # Column by column in numpy, and the answers' rows taken once, already in order: as frames concatenated,
    # filtered and then sorted, three copies of all the answers (15 MB each on the check_1m history) were
    # the model coverage's peak.
    names = ("task", "t", "state", "gen", "lease")
    cols = {name: np.concatenate([np.broadcast_to(np.asarray(part[k], dtype="float64"), len(part[0]))
                                  for part in parts]) for k, name in enumerate(names)}
    rows = np.flatnonzero(~np.isnan(cols["task"]) & ~np.isnan(cols["t"]))
    rows = rows[np.lexsort((cols["t"][rows], cols["task"][rows]))]  # by task, then t; ties as they come
    eff = pd.DataFrame({name: cols.pop(name)[rows] for name in names}, copy=False)
    by_task = eff.groupby("task", sort=False)
    eff["state"] = by_task["state"].ffill()
    eff["gen"] = by_task["gen"].cummax()  # NaNs are skipped: an unchanged generation keeps the last
    eff["gen"] = eff.groupby("task", sort=False)["gen"].ffill()
    eff["lease"] = by_task["lease"].ffill()
    return eff  # :class:`_Answers` sorts it by (task, time) again anyway: no third copy sorted by time


@dataclass(frozen=True)
class _Answers:
    """The answers of :func:`_effects` sorted once by (task, time), for every kind of call to look up."""

    times: np.ndarray  # their distinct times, sorted: a time's rank is its place here
    keys: np.ndarray  # task * width + the rank of the time, sorted
    rows: np.ndarray  # the answer (row of the effects) at each place of ``keys``
    width: int
    columns: dict[str, np.ndarray]  # task, state, gen, lease of each answer

    @classmethod
    def of(cls, eff: pd.DataFrame) -> _Answers:
        cols = {c: eff[c].to_numpy(dtype="float64") for c in ("task", "t", "state", "gen", "lease")}
        times = np.unique(cols["t"])
        width = len(times) + 1
        keys = cols["task"].astype(np.int64) * width + np.searchsorted(times, cols["t"])
        rows = np.argsort(keys, kind="stable")  # ties (one task, one instant) keep the answers' order
        return cls(times, keys[rows], rows, width, cols)


def _before(calls: pd.DataFrame, answers: _Answers) -> pd.DataFrame:
    """Per call (task, t): the task's state, generation and lease just before it (state absent: none), as
    the answers completed strictly before its invoke left them (a call's own answer never counts). Calls
    without a task or a time are left out, and the rows are not in the calls' order: the cells are counted.

    What ``pd.merge_asof(by="task", allow_exact_matches=False)`` gave (of several answers of a task at one
    instant, the last), by a binary search over one integer key, the task and the rank of the time (a
    call's rank: how many distinct answer times are strictly earlier): the merge hashed the 375k answers'
    tasks once per kind of call, a third of the model's time, and copied both sides."""
    task = calls["task"].to_numpy(dtype="float64")
    t = calls["t"].to_numpy(dtype="float64")
    known = ~np.isnan(task) & ~np.isnan(t)
    task, t = task[known], t[known]
    out = calls[known].reset_index(drop=True)
    a = answers
    if not len(a.keys):
        for col in ("gen", "lease"):
            out[col] = np.nan
        out["state"] = float(ABSENT)
        return out
    at = np.searchsorted(a.keys, task.astype(np.int64) * a.width + np.searchsorted(a.times, t, side="left")) - 1
    row = a.rows[np.maximum(at, 0)]
    hit = (at >= 0) & (a.columns["task"][row] == task)
    for col in ("state", "gen", "lease"):
        out[col] = np.where(hit, a.columns[col][row], np.nan)
    out["state"] = out["state"].fillna(ABSENT)
    return out


def _placed(op: int, calls: pd.DataFrame, answers: _Answers, tick: float) -> np.ndarray:
    """The cell codes of ``calls`` (columns task, t, now, caller_gen) of the op ``op`` (its index in
    coverage_space.OPS), each against its task's answers (sorted once for every kind)."""
    if not len(calls):
        return np.zeros(0, dtype=np.int64)
    m = _before(calls, answers)
    state = m["state"].to_numpy(dtype=np.int64)
    if op == cs.OPS.index("claim"):  # the task it returned existed: its registration committed before its ok
        state[state == ABSENT] = PENDING
    now = m["now"].to_numpy(dtype="float64")
    lease = m["lease"].to_numpy(dtype="float64")
    caller = callers_of(state, m["caller_gen"].to_numpy(dtype="float64"), m["gen"].to_numpy(dtype="float64"),
                        now, lease)
    return cell_codes(op, state, caller, times_of(state, now, lease, tick))


def _calls(task: Any, t: Any, now: Any, caller_gen: Any) -> pd.DataFrame:
    frame = pd.DataFrame({"task": np.asarray(task, dtype="float64"), "t": np.asarray(t, dtype="float64"),
                          "now": np.asarray(now, dtype="float64")})
    frame["caller_gen"] = np.broadcast_to(np.asarray(caller_gen, dtype="float64"), len(frame))
    return frame


def _claim_calls(fx: Facts) -> pd.DataFrame:
    """Each claim with a known answer: against the task it returned (the caller's previous generation of
    it from the caller's own earlier claims), or, returning nothing, against the caller's last claim."""
    c = fx.ops.claims
    ok = fx.claims_ok[["worker", "task", "gen", "now", "t_inv", "t_comp"]].sort_values("t_inv", kind="stable")
    prev = ok.groupby(["worker", "task"], sort=False)["gen"].shift(1)
    got = _calls(ok["task"], ok["t_inv"], ok["now"].fillna(ok["t_inv"]), prev)
    empty = c.loc[(c["status"] == "fail").to_numpy(dtype=bool), ["worker", "t_inv", "now"]]
    if not len(empty) or not len(ok):
        return got
    e = empty.sort_values("t_inv", kind="stable").dropna(subset=["t_inv"])
    last = ok[["worker", "t_comp", "task", "gen"]].dropna(subset=["t_comp"]).sort_values("t_comp", kind="stable")
    m = pd.merge_asof(e, last, left_on="t_inv", right_on="t_comp", by="worker", direction="backward")
    m = m[m["task"].notna()]
    asked = _calls(m["task"], m["t_inv"], m["now"].fillna(m["t_inv"]), m["gen"])
    return pd.concat([got, asked], ignore_index=True)


def _snapshot_codes(fx: Facts, tick: float) -> np.ndarray:
    """Each task row of every probe and of the final snapshot: its reported state, against its lease at
    the probe's invoke (the snapshot's time)."""
    frames = []
    probes = fx.run.probes
    if probes is not None and len(probes):
        when = probe_operations(fx).set_index("probe")["t_inv"]
        at = when.reindex(probes["probe"].to_numpy()).to_numpy(dtype="float64")
        frames.append((probes["state"].to_numpy(dtype=object), probes["lease_until"].to_numpy(dtype="float64"), at))
    snap = fx.run.snapshot
    if snap is not None and len(snap):
        t = np.nan if fx.run.snapshot_time is None else float(fx.run.snapshot_time)
        frames.append((snap["state"].to_numpy(dtype=object), snap["lease_until"].to_numpy(dtype="float64"),
                       np.full(len(snap), t)))
    codes = []
    for states, lease, at in frames:
        state = pd.Series(states, dtype=object).map(STATE_CODE).to_numpy(dtype="float64")
        known = ~np.isnan(state)
        s = state[known].astype(np.int64)
        never = np.full(len(s), NEVER, dtype=np.int64)
        codes.append(cell_codes(cs.OPS.index("snapshot"), s, never, times_of(s, at[known], lease[known], tick)))
    return np.concatenate(codes) if codes else np.zeros(0, dtype=np.int64)


# What a call is placed by: the columns of an operation frame :func:`_call_frames` reads.
_CALL_COLUMNS = ["task", "t_inv", "now", "gen"]


def _call_frames(fx: Facts) -> Iterator[tuple[str, pd.DataFrame]]:
    """Each kind of call of the run (its op, and its calls' task, t, now and caller_gen), one at a time: the
    model coverage's peak was all of them held at once (about 15 MB per 1M events) beside the answers.
    Only the columns a call is placed by are taken from an operation frame before its rows are: the rows of
    a whole frame were 20 MB of the 1M-event check's peak (the shared columns of one value made whole)."""
    yield "claim", _claim_calls(fx)
    reg = fx.ops.registers
    yield "register", _calls(reg["task"], reg["t_inv"], reg["now"].fillna(reg["t_inv"]), np.nan)
    fin = fx.ops.finishes
    fin = fin.loc[fin["task"].notna().to_numpy(dtype=bool), [*_CALL_COLUMNS, "outcome"]]
    outcome = fin["outcome"].to_numpy(dtype=object)
    for op, which in (("finish_done", outcome == "done"), ("finish_uncertain", outcome == "uncertain")):
        f = fin[which]
        yield op, _calls(f["task"], f["t_inv"], f["now"].fillna(f["t_inv"]), f["gen"])
    ext = fx.ops.extends
    ext = ext.loc[ext["task"].notna().to_numpy(dtype=bool), _CALL_COLUMNS]
    yield "extend", _calls(ext["task"], ext["t_inv"], ext["now"].fillna(ext["t_inv"]), ext["gen"])
    res = resolves(fx)
    yield "resolve", _calls(res["task"], res["t_inv"], res["t_inv"], res["gen"])


def reached_counts(fx: Facts, tick: float) -> np.ndarray:
    """How many calls of the run fell in each cell, in coverage_space.cells() order."""
    answers = _Answers.of(_effects(fx))
    codes = [_placed(cs.OPS.index(op), frame, answers, tick) for op, frame in _call_frames(fx)]
    codes.append(_snapshot_codes(fx, tick))
    return np.bincount(np.concatenate(codes), minlength=N_CELLS)


def extensions(fx: Facts, counts: np.ndarray) -> tuple[str, ...]:
    """The optional methods the queue had, as far as the run folder says (config.json's
    ``queue_capabilities``, else a call of it in the history)."""
    out = []
    for method in cs.ALL_EXTENSIONS:
        called = any(counts[i] for i, k in enumerate(CELLS) if k.startswith(method + "/"))
        if queue_has(fx, method) or called:
            out.append(method)
    return tuple(out)


def model_coverage(fx: Facts) -> ModelCoverage:
    """summary.json's ``coverage.model``: the cells reached (with counts), the possible ones not reached
    (the important ones apart), and the impossible ones by reason."""
    tick = cs.stress_tick(fx.lease)
    counts = reached_counts(fx, tick)
    out = summarize(counts, extensions(fx, counts), tick)
    out["unreached_why"] = unreached_why(fx, out["unreached"])
    return out


AIM = "aim_unreached"


def unreached_why(fx: Facts, unreached: list[str]) -> dict[str, str]:
    """Each possible cell no call reached -> why, in words: what the aim_unreached windows aimed at it
    did (their end records name their ``cell``), or why no window can reach it (takeover._internal.coverage_aims),
    or that no window came to it (the kind was off, or its windows went to cells before it in the seed's
    order)."""
    faults = fx.ops.faults
    mine = faults[faults["f"] == AIM] if len(faults) else faults
    cells = mine["cell_c"].to_numpy(dtype=object) if "cell_c" in mine else np.zeros(0, dtype=object)
    ends = mine["value_c"].to_numpy(dtype=object) if len(mine) else np.zeros(0, dtype=object)
    aimed: dict[str, list[str]] = {}
    for cell, end in zip(cells, ends, strict=True):
        if isinstance(cell, str):
            aimed.setdefault(cell, []).append(str(end) if isinstance(end, str) else "its end was never recorded")
    rate = requested_faults(fx.config).get(AIM, 0.0)
    out = {}
    for cell in unreached:
        tried = aimed.get(cell)
        if tried:
            last = tried[-1].removeprefix("missed: ")
            out[cell] = (f"{len(tried)} aim_unreached window(s) aimed at it; the last: "
                         + ("hit, but no call landed in the cell" if last == "hit" else f"missed, {last}"))
        elif way(cell) is None:
            out[cell] = why_not(cell)
        elif not rate and not len(mine):
            out[cell] = "no aim_unreached window in the run (--aim-unreached-rate 0, or a run from before the kind)"
        else:
            out[cell] = (f"none of the {len(mine)} aim_unreached window(s) came to it: each went to an unreached "
                         "cell earlier in the seed's order")
    return out


def summarize(counts: np.ndarray, exts: tuple[str, ...], tick: float) -> ModelCoverage:
    """The JSON section from the per-cell counts (coverage_space.cells() order)."""
    possible = cs.possible(exts)
    ruled_out = cs.impossible(exts)
    important = set(cs.important(exts))
    reached = {k: int(n) for k, n in zip(CELLS, counts, strict=True) if n and k not in ruled_out}
    unreached = [k for k in possible if k not in reached]
    by_reason: dict[str, int] = {}
    for why in ruled_out.values():
        by_reason[why] = by_reason.get(why, 0) + 1
    out: ModelCoverage = {"tick": round(tick, 6), "extensions": list(exts), "possible": len(possible),
                          "reached": len(reached), "cells": reached, "unreached": unreached,
                          "unreached_important": [k for k in unreached if k in important],
                          "impossible": by_reason}
    odd = {k: int(n) for k, n in zip(CELLS, counts, strict=True) if n and k in ruled_out}
    if odd:  # calls the model cannot place (a queue answering outside the spec): shown, never hidden
        out["impossible_reached"] = odd
    return out
