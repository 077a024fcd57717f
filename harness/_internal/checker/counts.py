"""What the run did, counted: duplicates by cause, outcomes, latencies, fault coverage, warnings.

None of these fail a run by default (duplicates can, through the gate in takeover._internal.checker.gate): they say how
hard the run pushed and what a user of this queue would have seen. The duplicates and their causes are
reconstructed in :mod:`takeover._internal.checker.duplicate_causes`; this module counts the rest and words the warnings.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pandas as pd

from takeover._internal.checker import network
from takeover._internal.checker.duplicate_causes import has_clock_faults
from takeover._internal.checker.facts import Facts
from takeover._internal.checker.ops import AIMED_FAULTS
from takeover._internal.checker.remedies import queue_has
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

FREEZE_IN_CALL = "freeze_in_call"  # the aimed fault whose workers record where they stopped (``failpoint``)
FAULT_KINDS = ("kill", "pause", "lose_reply", "slow", *AIMED_FAULTS)
MISSED = "missed: "  # how an aimed fault's ``value`` starts when its window was not reached
NO_END = "its end was not recorded (the coordinator stopped during the fault)"
# A freeze_in_call miss that says the queue gave it nothing to try (every statement of the call under SQLite's
# write lock: nothing can interleave there, and a correct transactional queue is exactly that), as the runner
# words it (takeover._internal.run.freeze_in_call). A run whose windows of the kind ended only so, or when the faulted
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


def _takeovers(co: pd.DataFrame, prev: pd.DataFrame, fin_acc: pd.DataFrame) -> np.ndarray:
    """Per claim of ``co`` (claims sorted by task, then invoke time; ``prev`` the row before each): whether it
    took its task over from a hand-out that had not ended: no finish of the task that the queue accepted
    returned between the task's claim before it and this claim's invoke.

    Why: a claim after an accepted finish is the queue handing out a task it had ended (a failed attempt
    retried, a finished task registered again and reset, a finished job run again), not a takeover, and its
    "recovery" is no time from a lease's end: graphile-worker's retry of a job failed as ``uncertain``,
    claimed seconds into its 4-hour lock, counted as a recovery of -14,374 s (tests/quality/test_counts.py).
    A finish of any generation: the queue ended the task when it accepted one (graphile-worker completes a
    job by id, a generation it never handed out included). Between the two claims, not at any time: a task
    registered again reuses its generations, and a stale holder's finish accepted after the takeover does
    not undo it. Invoke times order the claims, not generations: a reset hands out a generation again."""
    same = co["task"].eq(prev["task"]).to_numpy(dtype=bool, copy=True)
    rows = np.flatnonzero(same)
    pairs = pd.DataFrame({"row": rows, "task": co["task"].to_numpy()[rows], "lo": prev["t_inv"].to_numpy()[rows],
                          "hi": co["t_inv"].to_numpy()[rows]})
    m = pairs.merge(fin_acc[["task", "t_comp"]], on="task")
    ended = m.loc[(m["t_comp"] > m["lo"]) & (m["t_comp"] < m["hi"]), "row"].to_numpy()
    same[ended] = False
    return same


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
    co = fx.claims_ok[["task", "gen", "now", "lease_until", "t_inv"]].sort_values(["task", "t_inv", "gen"],
                                                                              kind="stable")
    prev = co.shift()
    took_over = _takeovers(co, prev, fx.fin_acc)
    takeovers = int(took_over.sum())
    # Orphan recovery: from the moment the taken-over lease expired to the claim that took the task over.
    recovery = (co["now"] - prev["lease_until"])[took_over & (co["gen"] == prev["gen"] + 1).to_numpy(dtype=bool)]
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
    lost_claims = network.lost_reply_coverage(fx)
    if lost_claims:
        out.append(lost_claims)
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
