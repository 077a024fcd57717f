"""What the run did, counted: duplicates by cause, outcomes, latencies, fault coverage, warnings.

None of these fail a run by default (duplicates can, through the gate in takeover.checker.gate): they say how
hard the run pushed and what a user of this queue would have seen. Duplicates come from the
ledger (ground truth for side effects), never from what workers believed.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pandas as pd

from takeover.checker import network
from takeover.checker.facts import Facts, power_loss_between, power_loss_times
from takeover.checker.invariants import _extended_leases
from takeover.checker.ops import AIMED_FAULTS
from takeover.checker.remedies import queue_has
from takeover.summary_types import (
    AimedCoverage,
    ClockCoverage,
    Counts,
    Coverage,
    Duplicates,
    FrozenPoint,
    Overruns,
    Percentiles,
    StateWindows,
)

EXAMPLES = 5
CAUSES = ("s5", "lost_lease", "other")
FREEZE_IN_CALL = "freeze_in_call"  # the aimed fault whose workers record where they stopped (``failpoint``)
CLOCK = "clock"  # the cause of duplicates that only a clock fault made (extra_actions); listed only in runs with them
POWER = "power_loss"  # the cause of duplicates a power loss made (extra_actions); listed only in runs with power losses
FAULT_KINDS = ("kill", "pause", "lose_reply", "slow", *AIMED_FAULTS)
MISSED = "missed: "  # how an aimed fault's ``value`` starts when its window was not reached
NO_END = "its end was not recorded (the coordinator stopped during the fault)"
# A freeze_in_call miss that says the queue gave it nothing to try (every statement of the call under SQLite's
# write lock: nothing can interleave there, and a correct transactional queue is exactly that), as the runner
# words it (takeover.run.freeze_in_call). A run whose windows of the kind ended only so, or when the faulted
# phase ended, gets no "never hit" warning: there was no window to reach.
NOTHING_TO_TRY = "nothing can run between those statements"
PHASE_ENDED = "the faulted phase ended first"


def _pct(values: np.ndarray, scale: float = 1.0) -> Percentiles:
    values = values[~np.isnan(values)]
    if len(values) == 0:
        return {"n": 0, "p50": None, "p99": None, "max": None}
    p50, p99 = np.percentile(values, [50, 99])
    return {"n": int(len(values)), "p50": round(float(p50) * scale, 3), "p99": round(float(p99) * scale, 3),
            "max": round(float(values.max()) * scale, 3)}


def _killed_at(fx: Facts) -> pd.Series:
    """Earliest SIGKILL (or exit -9) time per worker incarnation."""
    k = fx.ops.faults
    kills = k.loc[k["f"] == "kill", ["target", "t_inv"]].rename(columns={"t_inv": "t"})
    ex = fx.ops.exits
    sig = ex.loc[ex["value"].astype(str).isin(["-9", "-SIGKILL"]), ["target", "time"]].rename(columns={"time": "t"})
    both = pd.concat([kills, sig]).dropna()
    return both.groupby("target")["t"].min()


def has_clock_faults(fx: Facts) -> bool:
    """Whether the run requested or recorded clock faults: only then does ``by_cause`` list ``clock``, so
    runs without them keep their summary."""
    cfg = fx.config
    requested = any(isinstance(cfg.get(k), int | float) and cfg[k] > 0 for k in ("clock_skew_max", "clock_jump_rate"))
    return requested or fx.clocks is not None


def has_power_losses(fx: Facts) -> bool:
    """Whether the run requested or recorded power losses: only then does ``by_cause`` list
    ``power_loss``, so runs without them keep their summary."""
    rate = fx.config.get("power_loss_rate")
    return (isinstance(rate, int | float) and rate > 0) or bool(len(power_loss_times(fx)))


def causes(fx: Facts) -> tuple[str, ...]:
    """The causes ``by_cause`` lists for this run, in the order it lists them (the network's only with hosts)."""
    return (*CAUSES, *((CLOCK,) if has_clock_faults(fx) else ()), *((POWER,) if has_power_losses(fx) else ()),
            *(network.NETWORK_CAUSES if network.has_network(fx) else ()))


def duplicates(fx: Facts, extra: pd.DataFrame | None) -> tuple[Duplicates, list[float]]:
    """Tasks with more than one performed action, and each extra action's cause: the summary's
    ``duplicates`` section, and the codes of the tasks involved (the report draws their generations).
    ``extra`` is :func:`extra_actions`' frame (the duplicate gate, takeover.checker.gate, reads it too)."""
    if extra is None:
        return {"tasks": None, "extra_actions": None, "by_cause": {}, "examples": [], "note": "no ledger"}, []
    if not len(extra):
        return {"tasks": 0, "extra_actions": 0, "by_cause": dict.fromkeys(causes(fx), 0), "examples": []}, []
    cause = extra["cause"]
    by_cause = {c: int((cause == c).sum()) for c in causes(fx)}
    ex = [{"task": fx.name(r.task), "cause": r.cause, "gen": _i(r.gen), "by": _i(r.process), "at": fx.rel(r.t),
           "earlier_gen": _i(r.p_gen), "earlier_by": _i(r.p_process), "earlier_at": fx.rel(r.p_t),
           "older_lease_until": fx.rel(r.held_until), "taken_over_at": fx.rel(r.taken_at)}
          for r in extra.sort_values("t").head(EXAMPLES).itertuples()]
    if "real_lease_left" in extra:  # with clock faults: what the clocks hid, on the real clock
        for e, left in zip(ex, extra.sort_values("t").head(EXAMPLES)["real_lease_left"], strict=True):
            e["real_lease_left"] = None if pd.isna(left) else round(float(left), 3)
    tasks = np.unique(extra["task"].to_numpy(dtype="float64")).tolist()
    return {"tasks": len(tasks), "extra_actions": int(len(extra)), "by_cause": by_cause, "examples": ex}, tasks


def extra_actions(fx: Facts) -> pd.DataFrame | None:
    """One row per extra action (a performed action on a task that already had one), with its
    ``cause``; None without a ledger.

    Each extra action is paired with the performed action before it; of the two generations, the
    lower one is the *earlier holder* and the claim that took the task over from it is the next
    generation granted. The cause, first match wins:

    - ``other`` when both actions carry the same generation, or when the earlier holder's lease
      (its claim's ``lease_until``, or a later one set by an ``extend`` that surely returned before
      the takeover claim started) was still valid at the takeover claim's ``now``: a double lease,
      a queue bug (``lease_exclusive`` flags it too), whichever way the earlier holder ended;
    - ``lost_lease`` when the action comes from the older generation after the newer one acted:
      its holder outlived its lease (paused or slow) and acted anyway;
    - ``other`` when the earlier holder's finish was accepted (the task was handed out again after
      a finish took effect);
    - ``s5`` when the earlier holder was SIGKILLed after acting, so its finish never took effect;
    - ``lost_lease`` otherwise: it lived on past its lease and its finish was refused or never
      accepted;
    - and ``clock`` instead of ``lost_lease`` where only a clock fault lost the lease
      (:func:`_clock_made`): on the real clock the earlier holder's lease had not run out;
    - and ``power_loss`` instead of ``other`` where a power loss began between the two actions: the
      queue handed the task out again because the cut took back an acknowledged finish or claim
      (synchronous=NORMAL's price, which the ``power_loss`` section of summary.json counts), not
      because of a bug it would show on a machine that keeps its power.

    Why the lease test comes first: a holder whose lease was stolen has its finish refused and
    may act after the thief did, which looks exactly like a holder that outlived its lease; only
    the lease at the takeover tells the queue's bug from the worker's pause.
    """
    ledger = fx.run.ledger
    if ledger is None:
        return None
    done = ledger[ledger["performed"] == 1].sort_values(["task", "seq"], kind="stable").reset_index(drop=True)
    same = done["task"].eq(done["task"].shift())
    if not same.any():
        return done.iloc[0:0].assign(cause=pd.Series(dtype=object))
    prev = done.shift()
    extra = done[same].copy()
    extra["p_gen"] = prev["gen"][same]
    extra["p_t"] = prev["t"][same]
    extra["p_process"] = prev["process"][same]
    # Fill the earlier holder's process from the history when the ledger lacks it.
    # Only the duplicated tasks' rows (a few hundred of 100k+) are de-duplicated and joined; the
    # filter keeps their order, so the first row per (task, gen) is the same one.
    dup_tasks = extra["task"].unique()
    acts = fx.ops.actions[["task", "gen", "process"]]
    acts = acts[acts["task"].isin(dup_tasks)].dropna().drop_duplicates(["task", "gen"])
    acts = acts.rename(columns={"gen": "p_gen", "process": "h_process"})
    extra = extra.merge(acts, on=["task", "p_gen"], how="left")
    extra["p_process"] = extra["p_process"].fillna(extra["h_process"])
    finished = fx.fin_acc[["task", "gen"]]
    finished = finished[finished["task"].isin(dup_tasks)].drop_duplicates()
    finished = finished.rename(columns={"gen": "p_gen"}).assign(fin=True)
    extra = extra.merge(finished, on=["task", "p_gen"], how="left")
    extra["fin"] = extra["fin"].eq(True)
    killed = _killed_at(fx).rename("kill_t")
    extra = extra.merge(killed, left_on="p_process", right_index=True, how="left")
    killed_after = extra["kill_t"].notna() & (extra["kill_t"] >= extra["p_t"] - 1e-3)
    same_gen = extra["gen"].eq(extra["p_gen"])
    held, taken = _lease_at_takeover(fx, extra["task"], np.fmin(extra["gen"], extra["p_gen"]))
    extra["held_until"] = held
    extra["taken_at"] = taken
    double_lease = held > taken  # NaN (no lease or no takeover known) compares False
    # A holder that acts *after* a newer generation acted had lost its lease and lived on.
    late_stale = extra["gen"] < extra["p_gen"]
    cause = np.where(same_gen | double_lease, "other", np.where(late_stale, "lost_lease", np.where(
        extra["fin"], "other", np.where(killed_after, "s5", "lost_lease"))))
    if fx.clock_offset is not None:
        made, left = _clock_made(fx, extra, held)
        cause = np.where((cause == "lost_lease") & made, CLOCK, cause)
        extra["real_lease_left"] = left
    between, _at = power_loss_between(fx, extra["p_t"], extra["t"])
    cause = np.where((cause == "other") & between, POWER, cause)
    if network.has_network(fx):
        cause = _network_made(fx, extra, cause)
    extra["cause"] = cause
    return extra


def _network_made(fx: Facts, extra: pd.DataFrame, cause: np.ndarray) -> np.ndarray:
    """``partition``, ``conn_kill`` or ``db_restart`` instead of ``lost_lease`` or ``other`` where that
    network fault reached the earlier holder (the older generation's worker) between its claim and the
    extra action: the network, not a pause or a slow task, is what lost it the task (or, for ``other``,
    what made the queue hand out a task whose lease still held, as a lock that ends with a session does)."""
    older_first = (extra["p_gen"] <= extra["gen"]).to_numpy(dtype=bool)
    older_gen = np.where(older_first, extra["p_gen"], extra["gen"])
    older = np.where(older_first, extra["p_process"], extra["process"]).astype("float64")
    claims = fx.claims_ok[["task", "gen", "t_inv"]].drop_duplicates(["task", "gen"])
    since = pd.DataFrame({"task": extra["task"].to_numpy(), "gen": older_gen}).merge(
        claims, on=["task", "gen"], how="left")["t_inv"].to_numpy(dtype="float64")
    since = np.where(np.isnan(since), extra["p_t"].to_numpy(dtype="float64") - 1e9, since)
    made = network.causes(fx, older, since, np.fmax(extra["t"].to_numpy(dtype="float64"),
                                                    extra["p_t"].to_numpy(dtype="float64")))
    return np.where(np.isin(cause, ("lost_lease", "other")) & (made != ""), made, cause)


def _clock_made(fx: Facts, extra: pd.DataFrame, held: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per extra action: did a clock fault lose the earlier holder's lease? And the seconds its lease
    had left, on the real clock, when the task was taken over from it (negative: it had run out).

    Every ``now`` and ``lease_until`` is put on the real clock by taking off the offset of the clock
    that read it (``Facts.offset``). A lease that is judged by the clocks (as the checker and the
    queue judge it) to have run out was lost by a clock when, on the real clock:

    - the takeover claim came before the earlier lease ran out (the taker's clock was ahead of the
      holder's: its ``now`` had passed a lease that had not really ended), or
    - the earlier holder's finish was refused as late by its own clock (its ``now`` at or past its
      lease) while it was in fact called inside the lease (its clock had jumped ahead).

    With every offset 0 both reduce to comparisons the other causes already made, so a run without
    clock faults never has this cause.
    """
    gen = pd.Series(np.fmin(extra["gen"].to_numpy(dtype="float64"), extra["p_gen"].to_numpy(dtype="float64")),
                    index=extra.index)
    held_real, taken_real = _lease_at_takeover(fx, extra["task"], gen, real=True)
    early = held_real > taken_real
    rows = pd.DataFrame({"rid": np.arange(len(extra)), "task": extra["task"].to_numpy(dtype="float64"),
                         "gen": gen.to_numpy(), "held": held, "held_real": held_real})
    f = fx.fin_rej[["i", "task", "gen", "now"]]
    m = rows.merge(f[f["task"].isin(rows["task"])], on=["task", "gen"])
    real_now = m["now"].to_numpy(dtype="float64") - fx.offset(m["i"])
    refused_inside = m.loc[(m["now"].to_numpy(dtype="float64") >= m["held"].to_numpy()) & (real_now < m["held_real"]),
                           "rid"].unique()
    return early | np.isin(rows["rid"].to_numpy(), refused_inside), held_real - taken_real


def _lease_at_takeover(fx: Facts, task: pd.Series, gen: pd.Series, *,
                       real: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """For each (task, gen): the lease that generation held when the task was taken over from it,
    and the ``now`` of the claim that took it over (the next higher generation granted). With
    ``real``, both on the real clock: each ``now`` and lease less the offset of the clock that read it.

    The held lease is the claim's ``lease_until`` or a later one set by an ``extend`` that surely
    returned before the takeover claim started, the rule ``lease_exclusive`` uses, so an extra
    action called a double lease here is one that invariant can point at. Only the duplicated
    tasks' claims are sorted: a 1M-event run has a few hundred of them among 100k+ claims.
    """
    n = len(task)
    held = np.full(n, np.nan)
    taken = np.full(n, np.nan)
    c = fx.claims_ok
    c = c.loc[c["task"].isin(task.unique()), ["i", "task", "gen", "now", "lease_until", "t_inv"]]
    if not len(c):
        return held, taken
    ext_ok = None
    if real:
        off = fx.offset(c["i"])
        c = c.assign(now=c["now"].to_numpy(dtype="float64") - off,
                     lease_until=c["lease_until"].to_numpy(dtype="float64") - off)
        e = fx.ext_ok
        ext_ok = e.assign(lease_until_c=e["lease_until_c"].to_numpy(dtype="float64") - fx.offset(e["i"]))
    c = c.sort_values(["task", "gen", "t_inv"], kind="stable")
    lease = c.groupby(["task", "gen"], sort=False)["lease_until"].max()
    c = c.drop_duplicates(["task", "gen"]).reset_index(drop=True)
    c["lease_until"] = lease.to_numpy(dtype="float64")
    nxt = c.shift(-1)
    follows = c["task"].eq(nxt["task"])
    c["taken_at"] = nxt["now"].where(follows)
    c["taken_inv"] = nxt["t_inv"].where(follows)
    rows = pd.DataFrame({"task": task.to_numpy(dtype="float64"), "gen": gen.to_numpy(dtype="float64")})
    rows = rows.merge(c, on=["task", "gen"], how="left")
    rows["rid"] = np.arange(n)
    ext = _extended_leases(fx, rows, "taken_inv", ext_ok)[0].to_numpy(dtype="float64")
    held = np.fmax(rows["lease_until"].to_numpy(dtype="float64"), ext)
    taken = rows["taken_at"].to_numpy(dtype="float64")
    return held, taken


def _i(x: Any) -> int | None:
    return None if pd.isna(x) else int(x)


def counts(fx: Facts) -> Counts:
    ops = fx.ops
    def uniq(x: pd.Series) -> np.ndarray:
        return np.unique(x.dropna().to_numpy(dtype="float64"))

    registered = uniq(ops.registers["task"])
    if not len(registered) and fx.run.snapshot is not None:
        registered = uniq(fx.run.snapshot["task"])
    attempted = uniq(ops.actions["task"])
    ledger = fx.run.ledger
    performed = np.zeros(0)
    if ledger is not None:
        attempted = np.union1d(attempted, uniq(ledger["task"]))
        performed = uniq(ledger.loc[ledger["performed"] == 1, "task"])
    acc = fx.fin_acc
    done_tasks = uniq(acc.loc[acc["outcome"] == "done", "task"])
    uncertain_tasks = uniq(acc.loc[acc["outcome"] == "uncertain", "task"])
    claims = ops.claims
    fin = ops.finishes
    rej = fx.fin_rej
    # A refused finish is "stale" when a newer generation had been claimed before it returned.
    m = rej[["i", "task", "gen", "t_comp"]].merge(
        fx.claims_ok[["task", "gen", "t_inv"]].rename(columns={"gen": "gen_c", "t_inv": "t_inv_c"}), on="task")
    stale = m.loc[(m["gen_c"] > m["gen"]) & (m["t_inv_c"] < m["t_comp"]), "i"].nunique()
    # Only the columns used below: shifting every column of 100k+ claims (text ones included) costs more.
    co = fx.claims_ok[["i", "task", "gen", "now", "lease_until"]].sort_values(["task", "gen"], kind="stable")
    prev = co.shift()
    same = co["task"].eq(prev["task"])
    takeovers = int(same.sum())
    # Orphan recovery: from the moment a lease expired to the claim that took the task over.
    unfinished_prev = ~prev["i"].isin(fx.fin_acc["i"].to_numpy())
    recovery = (co["now"] - prev["lease_until"])[same & unfinished_prev & (co["gen"] == prev["gen"] + 1)]
    span = max(fx.t1 - fx.t0, 1e-9)
    lat: dict[str, Percentiles] = {}
    for name in ("claim", "action", "finish", "extend", "register"):
        frame = {"claim": claims, "action": ops.actions, "finish": fin, "extend": ops.extends,
                 "register": ops.registers}[name]
        # A mask over two columns, not a copy of every column of the completed operations.
        completed = frame["status"].isin(["ok", "fail"]).to_numpy(dtype=bool)
        if completed.any():
            took = frame["t_comp"].to_numpy(dtype="float64") - frame["t_inv"].to_numpy(dtype="float64")
            lat[name] = _pct(took[completed], 1000.0)
    snapshot = fx.run.snapshot
    # Final states from the queue's own snapshot. They may exceed the acknowledged counts: a finish
    # whose worker was killed mid-call took effect without ever being acknowledged.
    final_states = (
        {str(k): int(v) for k, v in snapshot["state"].astype(str).value_counts().sort_index().items()}
        if snapshot is not None else None
    )
    return {
        "tasks": len(registered),
        "final_states": final_states,
        "attempted": len(attempted),
        "acknowledged": len(done_tasks),
        "uncertain": len(uncertain_tasks),
        "recovered": len(np.intersect1d(uncertain_tasks, performed)),
        "lost": len(np.setdiff1d(done_tasks, performed)) if ledger is not None else None,
        "claims": {"ok": int(len(fx.claims_ok)), "empty": int((claims["status"] == "fail").sum()),
                   "indeterminate": int(claims["indeterminate"].sum())},
        "finishes": {"accepted": int(len(acc)), "rejected": int(len(rej)), "rejected_stale": int(stale),
                     "rejected_expired": int(len(rej) - stale), "indeterminate": int(fin["indeterminate"].sum())},
        "actions": {"requested": int(len(ops.actions)),
                    "performed": int(ledger["performed"].sum()) if ledger is not None else None},
        "takeovers": takeovers,
        "orphan_recovery_s": _pct(recovery.to_numpy(dtype="float64")),
        "throughput_per_s": round(len(acc) / span, 2),
        "duration_s": round(span, 3),
        "latency_ms": lat,
        "processes": int(fx.ops.spawns["target"].nunique()) if len(fx.ops.spawns) else
        int(fx.run.history.loc[fx.run.history["process"] > 0, "process"].nunique()),
        "unpaired_completions": fx.ops.unpaired_completions,
    }


def coverage(fx: Facts) -> Coverage:
    """Which faults hit, and where: the evidence that the run tested what it claims to."""
    faults = fx.ops.faults
    kills = faults[faults["f"] == "kill"]
    lost = faults[faults["f"] == "lose_reply"]
    ledger = fx.run.ledger
    cov: Coverage = {
        "kills": {"total": int(len(kills)),
                  "by_phase": {str(k): int(v) for k, v in kills["phase"].fillna("unknown").value_counts().items()},
                  "by_aim": {str(k): int(v) for k, v in kills["value"].fillna("random").value_counts().items()}},
        "pauses": _overruns(fx, "pause"),
        "slows": _overruns(fx, "slow"),
        "lost_replies": {"history": int(len(lost)),
                         "ledger": int((ledger["reply"] == "lost").sum()) if ledger is not None else None},
    }
    aimed = _aimed(fx)
    if aimed:
        cov["aimed"] = aimed
    if has_clock_faults(fx):
        cov["clock"] = _clock(fx)
    return cov


def _clock(fx: Facts) -> ClockCoverage:
    """The clock faults recorded: how many incarnations had an offset and how many jumps, the largest of each."""
    clocks = fx.clocks

    def tally(kind: str) -> tuple[int, float | None]:
        if clocks is None:
            return 0, None
        steps = clocks.loc[clocks["f"] == kind, "step"].abs()
        return int(len(steps)), round(float(steps.max()), 3) if len(steps) else None

    skewed, skew_max = tally("clock_skew")
    jumps, jump_max = tally("clock_jump")
    return {"skewed": skewed, "skew_abs_max": skew_max, "jumps": jumps, "jump_abs_max": jump_max}


def _aimed(fx: Facts) -> dict[str, AimedCoverage]:
    """Each aimed fault kind the run requested or recorded: its windows tried, hit and missed, from
    the records alone (``ok`` with ``value`` = ``hit`` or ``missed: <reason>``).

    Why from the history and not the runner's tally: a stored run is re-checked without the runner,
    and the records are what a reader can verify. A window whose end was never recorded (the
    coordinator was killed during it) counts as missed: nobody saw it reached. Kinds neither
    requested nor recorded are left out, so runs from before aimed faults keep their summary.
    """
    faults = fx.ops.faults
    rows = faults[faults["f"].isin(AIMED_FAULTS)]
    requested = {k for k, rate in requested_faults(fx.config).items() if rate} - not_applicable(fx)
    out: dict[str, AimedCoverage] = {}
    for kind in AIMED_FAULTS:
        mine = rows[rows["f"] == kind]
        if kind not in requested and not len(mine):
            continue
        ends = [v if s == "ok" else None for s, v in zip(mine["status"], mine["value_c"], strict=True)]
        reasons: Counter[str] = Counter()
        for end in ends:
            if end != "hit":
                text = str(end) if end is not None else NO_END
                reasons[text.removeprefix(MISSED) if text.startswith(MISSED) else text] += 1
        hit = sum(1 for end in ends if end == "hit")
        out[kind] = {"total": len(ends), "hit": hit, "missed": len(ends) - hit,
                     "reasons": dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))}
        states = [(st, end == "hit") for st, end in zip(mine["state_c"], ends, strict=True) if isinstance(st, str)]
        if states:
            by_state: dict[str, StateWindows] = {}
            for st, was_hit in sorted(states):
                w = by_state.setdefault(st, {"total": 0, "hit": 0})
                w["total"] += 1
                w["hit"] += int(was_hit)
            out[kind]["by_state"] = by_state
    if FREEZE_IN_CALL in out and (frozen := _frozen_points(fx)):
        out[FREEZE_IN_CALL]["frozen"] = frozen
    return out


def _frozen_points(fx: Facts) -> dict[str, FrozenPoint]:
    """Where freeze_in_call's workers stopped themselves inside a call (their ``info failpoint`` records,
    docs/history.md): per place, how often, and the statement's text the first time."""
    h = fx.run.history
    rows = h[(h["f"] == "failpoint").to_numpy(dtype=bool)]
    out: dict[str, FrozenPoint] = {}
    for where, sql in zip(rows["value"], rows["detail"], strict=True):
        if isinstance(where, str):
            point = out.setdefault(where, {"count": 0, "statement": sql if isinstance(sql, str) else ""})
            point["count"] += 1
    return out


def not_applicable(fx: Facts) -> set[str]:
    """Aimed kinds the run's queue gives nothing to try, which the runner skips: stale_heartbeat on a
    queue without extend() (as its config.json records). Requested or not, they are not expected to hit."""
    return {"stale_heartbeat"} if queue_has(fx, "extend") is False else set()


def _overruns(fx: Facts, kind: str) -> Overruns:
    """The pauses or slow tasks (``kind``) recorded, and how many outlasted the holder's lease."""
    faults = fx.ops.faults
    lease_of = fx.claim_lease().rename("held_until")
    rows = faults[faults["f"] == kind].merge(lease_of, left_on=["task", "gen"], right_index=True, how="left")
    length = (rows["t_comp"] - rows["t_inv"]).to_numpy(dtype="float64")
    planned = pd.to_numeric(rows["value"], errors="coerce").to_numpy(dtype="float64")
    length = np.where(np.isnan(length), planned, length)
    end = rows["t_inv"].to_numpy(dtype="float64") + length
    held = rows["held_until"].to_numpy(dtype="float64")
    past = np.where(~np.isnan(held), end > held, length > (fx.lease or np.inf))
    return {"total": int(len(rows)), "past_lease": int(np.nansum(past)), "length_s": _pct(length)}


def warnings(fx: Facts, cov: Coverage, dup: Duplicates) -> list[str]:
    out: list[str] = []
    stats = fx.run.stats
    if fx.interrupted:
        out.append("the run was interrupted (Ctrl-C / SIGTERM) before its drain: whether every task would "
                   "end terminal cannot be judged (no_lost_task is unknown); everything else is judged on what "
                   "was recorded")
    if stats.torn_tail:
        out.append("the history ends with a torn line (a writer was killed mid-write); it was dropped")
    if stats.corrupt_lines:
        out.append(f"{stats.corrupt_lines} corrupt history line(s) skipped, e.g. {stats.corrupt_examples[0]!r}")
    if fx.ops.unpaired_completions:
        out.append(f"{fx.ops.unpaired_completions} completion record(s) had no matching invoke")
    hits = {"kill": cov["kills"]["total"], "pause": cov["pauses"]["total"], "slow": cov["slows"]["total"],
            "lose_reply": max(cov["lost_replies"]["history"], cov["lost_replies"]["ledger"] or 0)}
    aimed = cov.get("aimed", {})
    hits.update({kind: a["hit"] for kind, a in aimed.items()})
    skipped = not_applicable(fx) | {kind for kind, a in aimed.items() if _nothing_to_try(a)}
    for key, rate in requested_faults(fx.config).items():
        if rate and hits.get(key, 0) == 0 and key not in skipped:
            out.append(f"fault '{key}' was requested (rate {rate}) but never hit" + _missed_words(aimed.get(key)))
    clock = cov.get("clock")
    jump_rate = fx.config.get("clock_jump_rate")
    if clock is not None and isinstance(jump_rate, int | float) and jump_rate > 0 and not clock["jumps"]:
        out.append(f"clock jumps were requested (rate {jump_rate}) but no worker's clock jumped")
    if cov["pauses"]["total"] and not cov["pauses"]["past_lease"]:
        out.append("no pause outlasted its lease: stale finishes were not exercised")
    out.extend(fx.run.notes)
    return out


def _nothing_to_try(aimed: AimedCoverage) -> bool:
    """Whether every window of an aimed kind that got anywhere found the queue giving it nothing to try."""
    reasons = aimed["reasons"]
    return any(NOTHING_TO_TRY in r for r in reasons) and all(NOTHING_TO_TRY in r or r in (PHASE_ENDED, NO_END)
                                                             for r in reasons)  # fmt: skip


def _missed_words(aimed: AimedCoverage | None) -> str:
    """Why an aimed fault that never hit missed, for its warning: each reason with its count."""
    if not aimed:
        return ""
    if not aimed["total"]:
        return ": none of its windows started"
    reasons = "; ".join(f"{why} ({n})" for why, n in aimed["reasons"].items())
    return f": all {aimed['missed']} window(s) missed - {reasons}"


def requested_faults(config: dict[str, Any]) -> dict[str, float]:
    """config.json ``faults``: kind -> rate, with keys like ``kill`` or ``kill_rate`` accepted."""
    raw = config.get("faults") or {}
    out: dict[str, float] = {}
    if not isinstance(raw, dict):
        return out
    for key, value in raw.items():
        for kind in FAULT_KINDS:
            if str(key) == kind or str(key).startswith(kind + "_") and "rate" in str(key):
                if isinstance(value, int | float):
                    out[kind] = max(out.get(kind, 0.0), float(value))
    # "lose_reply" also matches keys like "lost_reply" / "lose" for robustness.
    for key, value in raw.items():
        if str(key).startswith("lost") and isinstance(value, int | float):
            out["lose_reply"] = max(out.get("lose_reply", 0.0), float(value))
    return out
