"""Plain-words diagnosis: for each way a run broke an invariant, the likely defect in the queue and
the spec scenario (docs/spec.md, S1-S5) it breaks.

Why a pattern per defect and not a sentence per invariant: one invariant is broken by different
mistakes. ``generation_monotonic`` fails when a takeover does not raise the generation, when a claim
raises it by two, and when a task registered again starts over at 0; ``lease_exclusive`` when a
live lease is taken for expired and when two claims race through a claim that is not atomic. The
user needs to know which, so every violation (one row of the invariant's ``found``) is sorted into a
pattern by what the run folder shows around it: whether the task was registered again in between,
whether the two claims were in flight together, whether the task was already finished when a stale
finish was answered True, what the final snapshot holds. Each pattern carries the defect it points
at, in words, and the scenario of the spec that pins the promise. The words are a likely cause, not
a proof: ``takeover replay`` and the spec scenarios confirm it (the pipeline runs those, outside the
checker, which never imports the queue).

A pattern whose violations are the consequence of another invariant's (a task finished twice
because it was handed out again) names that invariant's defect, so the reports can group every
symptom of one defect under it.

The patterns themselves, each with its defect, its scenario and its sentence, are a table of their own
(:mod:`takeover._internal.checker.patterns`); this module sorts the violations into them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from takeover._internal.checker import network, unknown_claims
from takeover._internal.checker.facts import Facts, power_loss_between, volatile_restart_between
from takeover._internal.checker.invariant_result import InvariantResult
from takeover._internal.checker.patterns import PATTERNS, REDIS_POWER_LOSS, Fields, database_kind
from takeover.summary_types import DiagnosisJson, Example

TASKS_SHOWN = 10  # task ids listed per pattern in summary.json; violations.csv has every one

# -- what the run folder shows around a violation -----------------------------------------------------------
def _reregisters(fx: Facts) -> pd.DataFrame:
    """Every registration of a task after its first: a producer's retry, or the duplicate_register
    fault. A correct queue ignores them; an upsert starts the task over."""
    cached = getattr(fx, "_reregisters", None)
    if cached is None:
        r = fx.ops.registers[["i", "task", "t_inv", "t_comp"]].dropna(subset=["task"]).sort_values("i", kind="stable")
        cached = fx._reregisters = r[r["task"].duplicated()]  # type: ignore[attr-defined]
    return cached


def _reset_tasks(fx: Facts) -> np.ndarray:
    """The tasks a repeated registration visibly started over: the first claim after it returned a
    lower generation than one returned before it, or the same one inside that generation's lease
    or after the task was finished, or took a task that was finished when it was registered
    again; or the final snapshot shows pending at generation 0 a task
    that had been claimed before it was registered again. A queue that ignores a repeated
    registration, as the contract says, shows none of these, so a violation of another kind that
    happens to surround a repeated registration is not blamed on it."""
    cached = getattr(fx, "_reset_tasks", None)
    if cached is not None:
        return cached
    again = _reregisters(fx)[["task", "t_inv"]].rename(columns={"t_inv": "r_t"})
    reset: list[float] = []
    if len(again):
        m = fx.claims_ok[["task", "gen", "now", "t_inv", "lease_until"]].merge(again, on="task")
        before = m[m["t_inv"] < m["r_t"]].groupby(["task", "r_t"]).agg(top=("gen", "max"), lease=("lease_until", "max"))
        after = m[m["t_inv"] > m["r_t"]].sort_values("t_inv").groupby(["task", "r_t"]).first()
        j = before.join(after[["gen", "now", "t_inv"]], how="inner").reset_index()
        if len(j):
            finished = _finished_before(fx, j["task"], j["t_inv"])
            # An upsert that keeps the generation and only puts the state back to pending: the next claim
            # raises the generation as usual, but takes a task that was finished when it was registered again.
            ended = _finished_before(fx, j["task"], j["r_t"])
            went_back = ((j["gen"] < j["top"]) | ((j["gen"] == j["top"]) & ((j["now"] < j["lease"]) | finished))
                         | ((j["gen"] > j["top"]) & ended))
            reset += j.loc[went_back.to_numpy(dtype=bool), "task"].tolist()
        snap = fx.run.snapshot
        if snap is not None:
            first = _first_claim(fx, again["task"])
            claimed_before = again.loc[first < again["r_t"].to_numpy(dtype="float64"), "task"]
            zero = snap[(snap["state"] == "pending") & (snap["gen"] == 0)]["task"]
            reset += np.intersect1d(zero.to_numpy(dtype="float64"), claimed_before.to_numpy(dtype="float64")).tolist()
        reset += _reset_in_probes(fx, again).tolist()
    cached = fx._reset_tasks = np.unique(np.asarray(reset, dtype="float64"))  # type: ignore[attr-defined]
    return cached


def _reset_in_probes(fx: Facts, again: pd.DataFrame) -> np.ndarray:
    """The tasks a mid-run probe (takeover._internal.checker.probes) shows pending at generation 0 after a repeated
    registration, invoked before the probe ended, of a task claimed before that registration."""
    from takeover._internal.checker.probes import probe_operations

    probes = fx.run.probes
    if probes is None or not len(again):
        return np.zeros(0)
    zero = probes[(probes["state"] == "pending") & (probes["gen"] == 0)][["probe", "task"]]
    zero = zero.merge(probe_operations(fx)[["probe", "t_comp"]], on="probe").merge(again, on="task")
    zero = zero[zero["r_t"] < zero["t_comp"]]
    first = _first_claim(fx, zero["task"])
    return np.unique(zero.loc[first < zero["r_t"].to_numpy(dtype="float64"), "task"].to_numpy(dtype="float64"))


def _registered_again(fx: Facts, task: Any, lo: Any, hi: Any) -> np.ndarray:
    """Per row: a repeated registration of the row's task that may have taken effect between ``lo``
    and ``hi`` (invoked before ``hi``, not returned before ``lo``), of a task it visibly started over."""
    task = np.asarray(task, dtype="float64")
    out = np.zeros(len(task), dtype=bool)
    again = _reregisters(fx)
    again = again[again["task"].isin(_reset_tasks(fx))]
    if not len(again) or not len(task):
        return out
    rows = pd.DataFrame({"row": np.arange(len(task)), "task": task, "lo": np.asarray(lo, dtype="float64"),
                         "hi": np.asarray(hi, dtype="float64")})
    m = rows.merge(again, on="task")
    hit = (m["t_inv"] < m["hi"]) & ~(m["t_comp"] < m["lo"])
    out[m.loc[hit, "row"].to_numpy(dtype=np.int64)] = True
    return out


def _last_before(rows: pd.DataFrame, events: pd.DataFrame, at: str, value: str) -> np.ndarray:
    """Per row of ``rows`` (``task``, ``t``): ``value`` of the task's last event (``events``: task, ``at``,
    ``value``) strictly before ``t``; NaN where there is none."""
    out = np.full(len(rows), np.nan)
    known = rows["t"].notna().to_numpy() & rows["task"].notna().to_numpy()
    ev = pd.DataFrame({"task": events["task"].to_numpy(dtype="float64"), "_at": events[at].to_numpy(dtype="float64"),
                       "_value": events[value].to_numpy(dtype="float64")}).dropna(subset=["task", "_at"])
    if not known.any() or not len(ev):
        return out
    left = pd.DataFrame({"row": np.flatnonzero(known), "task": rows["task"].to_numpy(dtype="float64")[known],
                         "t": rows["t"].to_numpy(dtype="float64")[known]}).sort_values("t", kind="stable")
    right = ev.sort_values("_at", kind="stable")
    m = pd.merge_asof(left, right, left_on="t", right_on="_at", by="task", allow_exact_matches=False)
    out[m["row"].to_numpy(dtype=np.int64)] = m["_value"].to_numpy(dtype="float64")
    return out


def _finished_before(fx: Facts, task: Any, t: Any) -> np.ndarray:
    """Per row: the task was already finished at ``t``: an accepted finish of it had returned, and no
    successful claim of it was invoked since."""
    rows = pd.DataFrame({"task": np.asarray(task, dtype="float64"), "t": np.asarray(t, dtype="float64")})
    finished = _last_before(rows, fx.fin_acc, "t_comp", "t_comp")
    claimed = _last_before(rows, fx.claims_ok, "t_inv", "t_inv")
    return ~np.isnan(finished) & ~(claimed > finished)


def _first_claim(fx: Facts, task: Any) -> np.ndarray:
    """Per row: when the task's first successful claim was invoked (NaN: never claimed)."""
    first = fx.claims_ok.groupby("task", sort=False)["t_inv"].min()
    return pd.Series(np.asarray(task, dtype="float64")).map(first).to_numpy(dtype="float64")


def _lost_commits(fx: Facts) -> np.ndarray:
    """The tasks the final snapshot shows pending or running at the generation of one of their
    accepted finishes: that finish was answered True and did not stick. Only a finish that was never
    committed leaves that trace; a task handed out again after a real finish is running at a newer
    generation instead."""
    cached = getattr(fx, "_lost_commits", None)
    if cached is None:
        snap = fx.run.snapshot
        cached = np.zeros(0)
        if snap is not None:
            open_ = snap[snap["state"].isin(["pending", "running"])][["task", "gen"]]
            m = open_.merge(fx.fin_acc[["task", "gen"]], on=["task", "gen"])
            cached = np.unique(m["task"].to_numpy(dtype="float64"))
        fx._lost_commits = cached  # type: ignore[attr-defined]
    return cached


def _across_power_loss(fx: Facts, lo: Any, hi: Any) -> tuple[np.ndarray, list[float | None]]:
    """Per row: a power loss began after ``lo`` (the queue's acknowledged answer) and before ``hi``
    (what contradicts it), and when the first such one began (relative seconds, for the words).
    Only such a violation is blamed on the power loss: one with no power loss between its two
    events is the queue's own, as in any run."""
    hit, at = power_loss_between(fx, lo, hi)
    return hit, [fx.rel(t) if h else None for t, h in zip(at, hit, strict=True)]


def _vanished(fx: Facts, f: pd.DataFrame, keys: np.ndarray) -> dict[str, Any]:
    """Rows whose acknowledged answer came before a restart of a server without persistence: pattern
    ``vanished_on_restart`` (set in ``keys``), with when that restart began and how many tasks vanished."""
    hit, at = volatile_restart_between(fx, _answered_at(fx, f), np.full(len(f), np.inf))
    keys[hit] = "vanished_on_restart"
    count = len(set(f.loc[hit, "task"].tolist())) if hit.any() else 0
    return {"restart_at": [fx.rel(t) if h else None for t, h in zip(at, hit, strict=True)],
            "vanished": [count] * len(f)}


def _done_at(f: pd.DataFrame, comp: str, inv: str) -> np.ndarray:
    """When the operation that goes back on an answer took effect: its completion (its invocation where it has
    none). A call that began before a power loss of a Redis server's machine and was retried after it (the
    client's retry, on the rebooted server) took effect after it; a SQLite run's workers die at the power loss,
    so no call of theirs spans one and their verdicts are as before."""
    if comp not in f:
        return f[inv].to_numpy(dtype="float64")
    return f[comp].fillna(f[inv]).to_numpy(dtype="float64")


def _per_task(frame: pd.DataFrame, how: str, task: Any) -> np.ndarray:
    """Per row: the ``how`` (min or max) of ``frame``'s ``t_comp`` for the row's task (NaN: none)."""
    by = frame[["task", "t_comp"]].dropna().groupby("task")["t_comp"].agg(how)
    return pd.Series(np.asarray(task, dtype="float64")).map(by).to_numpy(dtype="float64")


def _answered_at(fx: Facts, f: pd.DataFrame) -> np.ndarray:
    """Per row of ``state_matches_history`` or ``no_lost_task``: when the queue gave the answer that the
    final state goes back on (NaN where the problem is not one a lost commit explains): the first claim
    that returned the highest generation (the snapshot shows a lower one), the last accepted finish
    (the task is not terminal), the first returned registration (the task is missing)."""
    problem = f["problem"].to_numpy(dtype=object)
    task = f["task"].to_numpy(dtype="float64")
    out = np.full(len(f), np.nan)
    lower = problem == "generation lower than one a claim returned"
    if lower.any():
        wanted = pd.DataFrame({"task": task[lower], "gen": f["max_gen"].to_numpy(dtype="float64")[lower]})
        top = fx.claims_ok.merge(wanted, on=["task", "gen"])
        out[lower] = _per_task(top, "min", task[lower])
    unfinished = np.isin(problem, ["not terminal although a finish was accepted", "not terminal after the drain"])
    out[unfinished] = _per_task(fx.fin_acc, "max", task[unfinished])
    missing = problem == "missing from the snapshot"
    regs = fx.ops.registers
    out[missing] = _per_task(regs[regs["status"] == "ok"], "min", task[missing])
    return out


def _snapshot_state(fx: Facts, task: Any) -> np.ndarray:
    snap = fx.run.snapshot
    if snap is None:
        return np.full(len(task), None, dtype=object)
    state = snap.drop_duplicates("task").set_index("task")["state"]
    return pd.Series(np.asarray(task, dtype="float64")).map(state).to_numpy(dtype=object)


Classified = tuple[np.ndarray, dict[str, Any]]  # a pattern key per row, and extra fields per row for the words


def _pick(default: str, *rules: tuple[Any, str]) -> np.ndarray:
    """The first rule whose mask holds, per row; ``default`` where none does."""
    out = np.full(len(rules[0][0]) if rules else 0, default, dtype=object)
    done = np.zeros(len(out), dtype=bool)
    for mask, key in rules:
        hit = np.asarray(mask, dtype=bool) & ~done
        out[hit] = key
        done |= hit
    return out


def _claim_times(fx: Facts, task: Any, gen: Any) -> tuple[np.ndarray, np.ndarray]:
    """Per row: when the successful claim that returned the row's (task, generation) was invoked and
    returned (NaN: no such claim; the first, when several returned it)."""
    rows = pd.DataFrame({"task": np.asarray(task, dtype="float64"), "gen": np.asarray(gen, dtype="float64")})
    c = fx.claims_ok[["task", "gen", "t_inv", "t_comp"]].sort_values("t_inv").drop_duplicates(["task", "gen"])
    m = rows.merge(c, on=["task", "gen"], how="left")
    return m["t_inv"].to_numpy(dtype="float64"), m["t_comp"].to_numpy(dtype="float64")


def _racing_claims(fx: Facts) -> set[tuple[float, float]]:
    """The (task, generation) of every successful claim that was in flight together with another
    successful claim of the same task: two claims at once that both took it (a claim race)."""
    cached = getattr(fx, "_racing_claims", None)
    if cached is None:
        c = fx.claims_ok[["task", "gen", "t_inv", "t_comp"]].dropna(subset=["task"]).reset_index(drop=True)
        m = c.reset_index(names="a").merge(c.reset_index(names="b"), on="task", suffixes=("", "_o"))
        m = m[(m["a"] != m["b"]) & (m["t_inv"] < m["t_comp_o"]) & (m["t_inv_o"] < m["t_comp"])]
        cached = set(zip(m["task"].astype(float), m["gen"].astype(float), strict=True))
        fx._racing_claims = cached  # type: ignore[attr-defined]
    return cached


def _no_stale_commit(fx: Facts, f: pd.DataFrame, results: dict[str, InvariantResult]) -> Classified:
    reset = _registered_again(fx, f["task"], f["t_inv_c"], f["t_comp_f"])
    finished = _finished_before(fx, f["task"], f["t_inv_f"])
    # The newer claim undone by a power loss: the older generation, handed out again, is current again.
    power, at = _across_power_loss(fx, f["t_comp_c"], f["t_inv_f"])
    # The newer claim still in flight when the finish was invoked: it may have taken effect after the finish,
    # taking the finished task again. It did when its own holder's finish was accepted later (a fenced finish
    # of a task a stale finish had ended is refused) or when it raced another claim of the task.
    in_flight = (f["t_comp_c"] > f["t_inv_f"]).to_numpy(dtype=bool)
    # Only a claim that returned after the finish did can have taken effect after it (a claim inside a long
    # finish call, one retried for seconds, returned first: the finish's write came after the takeover).
    after = (f["t_comp_c"] > f["t_comp_f"]).to_numpy(dtype=bool)
    later = fx.fin_acc[["task", "gen", "t_inv"]].rename(columns={"gen": "gen_c", "t_inv": "t_newer"})
    m = f[["task", "gen_c", "t_comp_f"]].reset_index(drop=True).reset_index(names="row").merge(
        later, on=["task", "gen_c"])
    finished_later = np.zeros(len(f), dtype=bool)
    finished_later[m.loc[m["t_newer"] > m["t_comp_f"], "row"].to_numpy(dtype=np.int64)] = True
    newer = zip(f["task"].astype(float), f["gen_c"].astype(float), strict=True)
    raced = np.array([key in _racing_claims(fx) for key in newer], dtype=bool)
    retaken = after & (finished_later | raced)
    keys = _pick("stale_commit", (power, "power_loss"), (reset, "reset_by_register"),
                 (finished, "accepted_when_finished"), (retaken, "claim_race"))
    # Every stale finish of the run was under way while the takeover was, none began after it returned: a
    # finish that is not fenced at all lets a stale holder through whenever it returns; one that checks,
    # then writes in a second statement, only in the moment between the two (case CheckThenActFinish).
    # A finish a network fault reached while it ran (a partition, a killed session) may have been retried
    # blind once the network healed: the network's doing, never the moment between a check and a write.
    netted = np.array([bool(network.hits(fx, p, a, b)) for p, a, b in zip(
        f["process_f"].astype(float), f["t_inv_f"].astype(float), f["t_comp_f"].astype(float), strict=True)],
        dtype=bool)
    stale = keys == "stale_commit"
    if stale.any() and in_flight[stale].all() and not netted[stale].any():
        keys[stale] = "check_then_act"
    return keys, {"power_loss_at": at, "in_flight": in_flight.tolist()}


def _finish_within_lease(fx: Facts, f: pd.DataFrame, results: dict[str, InvariantResult]) -> Classified:
    # A register that starts the task over does not explain a late finish (the finish's generation is
    # then gone), so there is no register rule here.
    finished = _finished_before(fx, f["task"], f["t_inv"])
    # A newer claim invoked before the finish returned: one still in flight may have taken effect first, and
    # the finish was then judged by the new holder's lease.
    done_at = f[["rid"]].merge(fx.fin_acc[["i", "t_comp"]], left_on="rid", right_on="i", how="left")["t_comp"]
    rows = f[["task", "gen", "t_inv"]].assign(t_comp=done_at.to_numpy(dtype="float64"))
    rows = rows.reset_index(drop=True).reset_index(names="row")
    m = rows.merge(fx.claims_ok[["task", "gen", "t_inv"]], on="task", suffixes=("", "_c"))
    m = m[(m["gen_c"] > m["gen"]) & (m["t_inv_c"] < m["t_comp"].fillna(m["t_inv"]))]
    newer = np.full(len(f), np.nan)
    top = m.groupby("row")["gen_c"].max()
    newer[top.index.to_numpy(dtype=np.int64)] = top.to_numpy(dtype="float64")
    unheld = (f["problem"] == "no claim of this process returned that generation").to_numpy(dtype=bool)
    keys = _pick("late_finish", (finished, "accepted_when_finished"), (unheld, "unheld_generation"),
                 (~np.isnan(newer), "late_after_takeover"))
    return keys, {"newer_gen": [None if np.isnan(g) else int(g) for g in newer]}


def _no_reclaim(fx: Facts, f: pd.DataFrame, results: dict[str, InvariantResult]) -> Classified:
    reset = _registered_again(fx, f["task"], f["t_comp_f"], f["t_comp_c"])
    state = _snapshot_state(fx, f["task"])
    # Handed out again and never terminal after, in a run where finishes are seen not to stick.
    lost = np.isin(state, ["pending", "running"]) & bool(len(_lost_commits(fx)))
    lease = fx.claim_lease()
    held = lease.reindex(pd.MultiIndex.from_arrays([f["task"], f["gen_f"]])).to_numpy(dtype="float64")
    after_lease = f["now_c"].to_numpy(dtype="float64") >= held
    power, at = _across_power_loss(fx, f["t_comp_f"], _done_at(f, "t_comp_c", "t_inv_c"))
    restart, restart_at = _across_db_restart(fx, f["t_comp_f"], f["t_inv_c"])
    keys = _pick("reclaimed", (power, "power_loss"), (reset, "reset_by_register"), (restart, "db_restart"),
                 (lost, "lost_commit"), (after_lease, "reclaimed_after_lease"))
    return keys, {"final_state": state, "power_loss_at": at, "restart_at": restart_at}


def _lost_answer_between(fx: Facts, lo: Any, hi: Any) -> np.ndarray:
    """Per row: the server's answer to a *claim* was lost (``db_lost_reply``, its ``ok``, while the worker it hit
    had a claim in flight) after ``lo`` and before ``hi`` (NaN ``lo``: any time before). Its client ran the
    claim again, and the call answered: a claim that is not safe to run twice took a generation there that no
    claim returned."""
    ends = network.lost_claim_answers(fx)
    lo, hi = np.nan_to_num(np.asarray(lo, dtype="float64"), nan=-np.inf), np.asarray(hi, dtype="float64")
    return np.array([any(a < t < b for t in ends) for a, b in zip(lo, hi, strict=True)], dtype=bool)


def _across_db_restart(fx: Facts, lo: Any, hi: Any) -> tuple[np.ndarray, list[float | None]]:
    """Per row: a database restart (``--db-restart-rate``) began after ``lo`` (an acknowledged finish) and
    before ``hi`` (the claim that handed the task out again), and when the first such one began (relative
    seconds). A finish answered True and then gone after a crash was acknowledged before it was durable."""
    lo, hi = np.asarray(lo, dtype="float64"), np.asarray(hi, dtype="float64")
    hit = np.zeros(len(lo), dtype=bool)
    at: list[float | None] = [None] * len(lo)
    starts = sorted(w[0] for w in network._windows(fx, network.DB_RESTART))
    for j, (a, b) in enumerate(zip(lo, hi, strict=True)):
        first = next((t for t in starts if a < t < b), None)
        if first is not None:
            hit[j], at[j] = True, fx.rel(first)
    return hit, at


def _generation_monotonic(fx: Facts, f: pd.DataFrame, results: dict[str, InvariantResult]) -> Classified:
    kind = f["kind"].to_numpy(dtype=object)
    dup = kind == "duplicate generation"
    back = kind == "generation went back in time"
    # The highest generation returned before this claim started: what it went back from.
    rows = f[["task", "gen", "t_inv"]].reset_index(drop=True).reset_index(names="row")
    m = rows.merge(fx.claims_ok[["task", "gen", "t_comp"]], on="task", suffixes=("", "_c"))
    top = m[m["t_comp"] < m["t_inv"]].groupby("row")["gen_c"].max()
    higher = f["prev_gen"].to_numpy(dtype="float64").copy()
    higher[top.index.to_numpy(dtype=np.int64)] = np.fmax(higher[top.index.to_numpy(dtype=np.int64)],
                                                         top.to_numpy(dtype="float64"))
    reset = (dup | back) & _registered_again(fx, f["task"], f["prev_t"], f["t_comp"])
    t_inv, t_comp = f["t_inv"].to_numpy(dtype="float64"), f["t_comp"].to_numpy(dtype="float64")
    race = dup & (t_inv < f["prev_t"].to_numpy(dtype="float64")) & (f["prev_t_inv"].to_numpy(dtype="float64") < t_comp)
    power, at = _across_power_loss(fx, f["prev_t"], _done_at(f, "t_comp", "t_inv"))
    restart, restart_at = _across_db_restart(fx, f["prev_t"], f["t_inv"])
    keys = _pick("skipped", ((dup | back) & power, "power_loss"), (reset, "reset_by_register"), (race, "claim_race"),
                 ((dup | back) & restart, "db_restart"), (dup, "no_bump"), (back, "went_back"),
                 (_lost_answer_between(fx, f["prev_t"], f["t_inv"]), "claim_retried"))
    return keys, {"higher_gen": [None if np.isnan(g) else int(g) for g in higher], "power_loss_at": at,
                  "restart_at": restart_at}


def _lease_exclusive(fx: Facts, f: pd.DataFrame, results: dict[str, InvariantResult]) -> Classified:
    t_inv, t_comp = f["t_inv"].to_numpy(dtype="float64"), f["t_comp"].to_numpy(dtype="float64")
    p_inv, p_comp = f["p_t_inv"].to_numpy(dtype="float64"), f["p_t_comp"].to_numpy(dtype="float64")
    # Pairs go by generation: after a reset, the "previous" claim may be the later one.
    reset = _registered_again(fx, f["task"], np.fmin(t_inv, p_inv), np.fmax(t_comp, p_comp))
    race = (t_inv < p_comp) & (p_inv < t_comp)
    power, at = _across_power_loss(fx, np.fmin(p_comp, t_comp), np.fmax(t_inv, p_inv))
    # A stale generation's heartbeat answered (invariants._stale_extends): its own defect, unless a power
    # loss or a register in between put the older generation back.
    stale = f["stale_extend"].fillna(False).to_numpy(dtype=bool) if "stale_extend" in f else np.zeros(len(f), bool)
    # The holder's session cut (a partition of its host, its session killed, the database restarted) between
    # its claim and the claim that took its live lease: the lease ended with the session, not at lease_until.
    cut = np.array([bool(network.hits(fx, p, a, b)) for p, a, b in zip(
        f["p_process"].astype(float), f["p_t_comp"].astype(float), f["t_comp"].astype(float), strict=True)],
        dtype=bool) if "p_process" in f and network.has_network(fx) else np.zeros(len(f), bool)
    return _pick("lease_stolen", (power, "power_loss"), (reset, "reset_by_register"), (stale, "stale_extend"),
                 (race, "claim_race"), (cut, "session_lease")), {"power_loss_at": at}


def _single_finish(fx: Facts, f: pd.DataFrame, results: dict[str, InvariantResult]) -> Classified:
    reset = _registered_again(fx, f["task"], f["e_t_comp"], f["t_comp"])
    rows = pd.DataFrame({"task": f["task"].to_numpy(dtype="float64"), "t": f["t_inv"].to_numpy(dtype="float64")})
    claimed = _last_before(rows, fx.claims_ok, "t_inv", "t_inv")
    reclaimed = claimed > f["e_t_comp"].to_numpy(dtype="float64")
    power, at = _across_power_loss(fx, f["e_t_comp"], _done_at(f, "t_comp", "t_inv"))
    # The claim that gave the later finish's (newer) generation was invoked before the earlier finish returned
    # and returned after it: it took the task once that finish had ended it (a claim race), not an idempotent
    # finish.
    c_inv, c_comp = _claim_times(fx, f["task"], f["gen"])
    e_comp = f["e_t_comp"].to_numpy(dtype="float64")
    raced = (f["gen"].to_numpy(dtype="float64") > f["e_gen"].to_numpy(dtype="float64")) & (c_inv < e_comp) \
        & (c_comp > e_comp)
    # A lower generation's finish still under way when the newer one's was invoked: a stale finish that went
    # through late (after the takeover), not a finish answered True for a task already finished.
    stale = (f["e_gen"].to_numpy(dtype="float64") < f["gen"].to_numpy(dtype="float64")) \
        & (f["t_inv"].to_numpy(dtype="float64") < e_comp)
    return _pick("accepted_when_finished", (power, "power_loss"), (reset, "reset_by_register"),
                 (reclaimed, "after_reclaim"), (raced, "claim_race"), (stale, "stale_overlap")), {"power_loss_at": at}


_STATE_PROBLEMS = {
    "generation above every claim, beyond what indeterminate claims explain": "generation_unreported",
    "not terminal although a finish was accepted": "finish_not_durable",
    "lease_until differs from the one its claim returned": "lease_mismatch",
    "state or generation differs from its last resolve": "resolve_not_applied",
    "missing from the snapshot": "row_missing",
    "in the snapshot but never registered": "row_invented",
}


def _state_matches(fx: Facts, f: pd.DataFrame, results: dict[str, InvariantResult]) -> Classified:
    problem = f["problem"].to_numpy(dtype=object)
    keys = np.array([_STATE_PROBLEMS.get(p, "snapshot_malformed") for p in problem], dtype=object)
    gen, top = f["gen"].to_numpy(dtype="float64"), f["max_gen"].to_numpy(dtype="float64")
    lower = problem == "generation lower than one a claim returned"
    keys[lower] = np.where(gen[lower] == top[lower] - 1, "snapshot_behind", "generation_lost")
    # A terminal state no finish of its generation explains: the latest lower generation whose
    # finish was accepted is the stale holder that wrote it.
    unexplained = problem == "terminal state no finish of that generation and outcome explains"
    rows = f[["task", "gen"]].reset_index(drop=True).reset_index(names="row")
    m = rows.merge(fx.fin_acc[["task", "gen"]], on="task", suffixes=("", "_f"))
    stale = m[m["gen_f"] < m["gen"]].groupby("row")["gen_f"].max()
    stale_gen = np.full(len(f), np.nan)
    stale_gen[stale.index.to_numpy(dtype=np.int64)] = stale.to_numpy(dtype="float64")
    keys[unexplained] = np.where(np.isnan(stale_gen[unexplained]), "terminal_unexplained", "stale_overwrite")
    for j in np.flatnonzero(keys == "terminal_unexplained"):  # a finish's retry after its answer was lost
        if network.finish_reply_lost(fx, f["task"].iloc[j], [gen[j]]):
            keys[j] = "finish_retried"
    first = _first_claim(fx, f["task"])
    reset = _registered_again(fx, f["task"], first, np.full(len(f), np.inf)) & ~np.isnan(first)
    not_durable = keys == "finish_not_durable"
    keys[not_durable & ~np.isin(f["task"].to_numpy(dtype="float64"), _lost_commits(fx))] = "reopened"
    keys[reset] = "reset_by_register"
    power, at = _across_power_loss(fx, _answered_at(fx, f), np.full(len(f), np.inf))
    keys[power] = "power_loss"
    vanished = _vanished(fx, f, keys)
    unreported = keys == "generation_unreported"
    if unreported.any():  # a claim run twice by its client's retry took the generation no claim returned
        after = unknown_claims.taken_after(fx, f["task"].to_numpy()[unreported], top[unreported])
        keys[np.flatnonzero(unreported)[_lost_answer_between(fx, after, np.full(len(after), np.inf))]] = \
            "claim_retried"
    probed = f["probe"].notna().to_numpy(dtype=bool) if "probe" in f else np.zeros(len(f), dtype=bool)
    if probed.any():
        keys[probed] = _probe_keys(fx, f[probed])
    return keys, {"stale_gen": [None if np.isnan(g) else int(g) for g in stale_gen], "power_loss_at": at,
                  **vanished}


def _probe_keys(fx: Facts, f: pd.DataFrame) -> np.ndarray:
    """The pattern of each mid-run probe's violation (takeover._internal.checker.probes). Never ``power_loss``: a
    probe is not judged across one. A reset by a repeated registration goes first, as for the final
    snapshot; a lost commit leaves the task open at the very generation whose finish was answered True
    (``max_gen`` holds that generation for these rows), a task handed out again shows a newer one."""
    from takeover._internal.checker.probes import HIGHER, LOWER, MISSING, NOT_TERMINAL

    problem = f["problem"].to_numpy(dtype=object)
    gen, top = f["gen"].to_numpy(dtype="float64"), f["max_gen"].to_numpy(dtype="float64")
    task = f["task"].to_numpy(dtype="float64")
    first = _first_claim(fx, task)
    reset = _registered_again(fx, task, first, f["at"].to_numpy(dtype="float64")) & ~np.isnan(first)
    # A claim's generation the probe no longer shows, with a database restart between the claim's answer and
    # the probe: the crash took the acknowledged claim back.
    _inv, claimed = _claim_times(fx, task, top)
    restart, _at = _across_db_restart(fx, claimed, f["at"].to_numpy(dtype="float64"))
    return _pick("probe_generation_lost", (reset, "probe_reset_by_register"),
                 ((problem == LOWER) & restart, "probe_db_restart"),
                 ((problem == NOT_TERMINAL) & (gen == top), "probe_finish_lost"),
                 (problem == NOT_TERMINAL, "probe_reopened"),
                 ((problem == LOWER) & (gen == top - 1), "probe_snapshot_behind"),
                 ((problem == HIGHER) & _lost_answer_between(fx, unknown_claims.taken_after(fx, task, top),
                                                             f["at"].to_numpy(dtype="float64")),
                  "probe_claim_retried"),
                 (problem == HIGHER, "probe_generation_unreported"), (problem == MISSING, "probe_row_missing"))


def _no_lost_task(fx: Facts, f: pd.DataFrame, results: dict[str, InvariantResult]) -> Classified:
    problem = f["problem"].to_numpy(dtype=object)
    state = f["state"].to_numpy(dtype=object)
    task = f["task"].to_numpy(dtype="float64")
    unfinished = problem == "not terminal after the drain"
    finished = np.isin(task, fx.fin_acc["task"].to_numpy(dtype="float64"))
    first = _first_claim(fx, task)
    never = unfinished & (state == "pending") & np.isnan(first)
    # Passed over: a task registered after this one was handed out while this one never was.
    reg = fx.ops.registers.dropna(subset=["task"]).drop_duplicates("task")
    order = pd.Series(reg["i"].to_numpy(dtype="float64"), index=reg["task"].to_numpy(dtype="float64"))
    mine = pd.Series(task).map(order).to_numpy(dtype="float64")
    claimed = order[order.index.isin(fx.claims_ok["task"].to_numpy(dtype="float64"))]
    later_taken = mine < (claimed.max() if len(claimed) else -np.inf)
    # ... or a claim answered that nothing was claimable while it was pending.
    c = fx.ops.claims
    empty = np.sort(c.loc[(c["status"] == "fail").to_numpy(dtype=bool), "t_inv"].to_numpy(dtype="float64"))
    reg_done = pd.Series(reg["t_comp"].fillna(reg["t_inv"]).to_numpy(dtype="float64"),
                         index=reg["task"].to_numpy(dtype="float64"))
    done_at = pd.Series(task).map(reg_done).to_numpy(dtype="float64")
    refused_after = np.searchsorted(empty, done_at, side="right") < len(empty)
    passed = never & (later_taken | refused_after)
    # Starved: finished tasks were handed out again after this one was registered.
    reclaims = results["no_reclaim_after_terminal"].found
    registered_at = pd.Series(reg["t_inv"].to_numpy(dtype="float64"), index=reg["task"].to_numpy(dtype="float64"))
    since = pd.Series(task).map(registered_at).to_numpy(dtype="float64")
    last_reclaim = reclaims["t_inv_c"].max() if reclaims is not None and len(reclaims) else -np.inf
    starved = never & ~(since >= last_reclaim)
    reset = _registered_again(fx, task, first, np.full(len(f), np.inf)) & ~np.isnan(first)
    power, at = _across_power_loss(fx, _answered_at(fx, f), np.full(len(f), np.inf))
    keys = _pick("left_unfinished", (power, "power_loss"),
                 (problem == "missing from the snapshot", "row_missing"),
                 (reset, "reset_by_register"),
                 (problem == "terminal but its action was never attempted", "terminal_without_action"),
                 (unfinished & np.isin(task, _lost_commits(fx)), "finish_not_durable"),
                 (unfinished & finished, "reopened"), (passed, "passed_over"), (starved, "starved"),
                 (never, "never_claimed"), (unfinished & (state == "running"), "left_running"))
    return keys, {"power_loss_at": at, **_vanished(fx, f, keys)}


CLASSIFY: dict[str, Callable[[Facts, pd.DataFrame, dict[str, InvariantResult]], Classified]] = {
    "no_stale_commit": _no_stale_commit,
    "finish_within_lease": _finish_within_lease,
    "no_reclaim_after_terminal": _no_reclaim,
    "generation_monotonic": _generation_monotonic,
    "lease_exclusive": _lease_exclusive,
    "single_finish": _single_finish,
    "state_matches_history": _state_matches,
    "no_lost_task": _no_lost_task,
}


# -- every violation, and the diagnosis --------------------------------------------------------------------
# Per invariant, which of a violation's fields are the violating operation's time, the generations
# and the worker incarnations involved: the columns violations.csv shares across invariants.
AT = {"no_stale_commit": "finish_at", "finish_within_lease": "now", "no_reclaim_after_terminal": "reclaimed_at",
      "generation_monotonic": "claimed_at", "lease_exclusive": "granted_now", "single_finish": "finish_at",
      "state_matches_history": "probe_at"}  # a mid-run probe's violation; the final snapshot's have no time
GENERATIONS = {"no_stale_commit": ("finish_gen", "claimed_gen"), "finish_within_lease": ("gen",),
               "no_reclaim_after_terminal": ("finished_gen", "reclaimed_gen"),
               "generation_monotonic": ("previous_gen", "gen"), "lease_exclusive": ("held_gen", "granted_gen"),
               "single_finish": ("earlier_gen", "gen"), "state_matches_history": ("gen", "highest_claimed_gen"),
               "no_lost_task": ("gen",)}
PROCESSES = {"no_stale_commit": ("finish_by", "claimed_by"), "finish_within_lease": ("finish_by",),
             "no_reclaim_after_terminal": ("finished_by", "reclaimed_by"),
             "generation_monotonic": ("previous_by", "claimed_by"), "lease_exclusive": ("held_by", "granted_to"),
             "single_finish": ("earlier_by", "finish_by")}


@dataclass(frozen=True)
class Diagnosis:
    """Every violation of the run, one row each (what violations.csv holds), and the patterns they
    fall into, each with its sentence (summary.json's ``diagnosis``)."""

    rows: list[Example]
    entries: list[DiagnosisJson]


def _common(name: str, fields: Fields) -> Fields:
    def joined(keys: tuple[str, ...]) -> str:
        return " ".join(str(fields[k]) for k in keys if fields.get(k) is not None)

    return {"at": fields.get(AT.get(name, ""), None), "generations": joined(GENERATIONS.get(name, ())),
            "processes": joined(PROCESSES.get(name, ()))}


def diagnose(fx: Facts, results: dict[str, InvariantResult]) -> Diagnosis:
    """Sort every violation into its pattern and tell each pattern in one sentence."""
    rows: list[Example] = []
    entries: list[DiagnosisJson] = []
    database = database_kind(fx.config)
    for name, res in results.items():
        if res.valid is not False or res.found is None or not len(res.found):
            continue
        found = res.found.reset_index(drop=True)
        keys, extra = CLASSIFY[name](fx, found, results)
        fields = res.every_violation()
        for key, f in zip(keys, fields, strict=True):
            row: Example = {"invariant": name, "pattern": key, "task": f.get("task"), **_common(name, f)}
            row["cause"] = network.violation_cause(fx, row)
            rows.append({**row, **{k: v for k, v in f.items() if k != "task"}})
        by_key: dict[str, list[int]] = {}
        for j, key in enumerate(keys):
            by_key.setdefault(str(key), []).append(j)
        mine: list[DiagnosisJson] = []
        for key, at in by_key.items():
            pattern = PATTERNS[name][key]
            first = {**fields[at[0]], **{k: v[at[0]] for k, v in extra.items()}}
            defect, scenario = pattern.defect_on(database), pattern.scenario
            if key == "power_loss" and database == "redis":
                defect = REDIS_POWER_LOSS  # the server's machine lost its power, not the queue's files'
            leader = next((e for e in entries if e["invariant"] == pattern.follows), None)
            if leader is not None:  # the consequence of another invariant's violations: its defect
                defect, scenario = leader["defect"], leader["scenario"]
            tasks = list(dict.fromkeys(fields[j].get("task") for j in at))
            mine.append({"invariant": name, "pattern": key, "scenario": scenario, "defect": defect,
                         "sentence": f"{pattern.what(first)}: {defect} ({scenario})", "count": len(at),
                         "task_count": len(tasks), "tasks": tasks[:TASKS_SHOWN],
                         "replay_task": tasks[0] if pattern.replay and tasks[0] is not None else None})
        entries += sorted(mine, key=lambda e: -e["count"])  # stable: ties keep the order of their first violation
    return Diagnosis(rows, entries)
