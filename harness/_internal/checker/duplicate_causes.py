"""Duplicate side effects by cause: which repeated actions the ledger shows, and what made each one.

Why apart from :mod:`takeover._internal.checker.counts`: a duplicate's cause (the S5 window, a lost lease, a clock
fault, a power loss, the network, or something else) is a reconstruction of leases and takeovers over the
history and the ledger, one job of its own; the gate (takeover._internal.checker.gate), the power-loss section and the
diagnosis read it, and the counts only report it. Duplicates come from the ledger (ground truth for side
effects), never from what workers believed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from takeover._internal.checker import network
from takeover._internal.checker.facts import Facts, power_loss_between, power_loss_times
from takeover._internal.checker.invariants import extended_leases
from takeover.summary_types import Duplicates

EXAMPLES = 5
CAUSES = ("s5", "lost_lease", "other")
CLOCK = "clock"  # the cause of duplicates that only a clock fault made (extra_actions); listed only in runs with them
POWER = "power_loss"  # the cause of duplicates a power loss made (extra_actions); listed only in runs with power losses



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
    ``extra`` is :func:`extra_actions`' frame (the duplicate gate, takeover._internal.checker.gate, reads it too)."""
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
    ext = extended_leases(fx, rows, "taken_inv", ext_ok)[0].to_numpy(dtype="float64")
    held = np.fmax(rows["lease_until"].to_numpy(dtype="float64"), ext)
    taken = rows["taken_at"].to_numpy(dtype="float64")
    return held, taken



def _i(x: Any) -> int | None:
    return None if pd.isna(x) else int(x)
