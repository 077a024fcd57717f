"""``tuning.json``: what a tuning concludes, in production units, with its evidence and its command.

The keys ``lease``, ``heartbeat`` (None without ``extend()``), ``duplicates_per_1000``,
``duplicates_per_1000_upper``, ``recovery_p50``, ``recovery_p99``, ``time_scale``, ``runs``, ``tasks``,
``resolved`` and ``command`` are a public contract; the rest is added around them.

Why ``duplicates_per_1000`` counts the lease-caused duplicates only (a live holder outlived its lease):
they are what the lease decides, and what the target is about. Crash-caused ones (a kill after the
action, S5) happen at any lease; they are given apart (``crash_duplicates_per_1000``), scaled from the
runs' kill rate to the production crash rate, and summed into the per-day figure.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from takeover._internal import bridge
from takeover._internal.sweep.wilson import wilson
from takeover._internal.tune.driver import Tuning
from takeover._internal.tune.plan import HEARTBEAT_FRACTION
from takeover._internal.tune.search import Search
from takeover.adapters import arq, node_libraries
from takeover.contract import load_queue_factory
from takeover.errors import ContractError


def _r(x: Any, nd: int = 3) -> float | None:
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else round(x, nd)


def _mean(rows: list[dict[str, Any]], key: str) -> float | None:
    vals = [float(r[key]) for r in rows if r.get(key) not in (None, "")]
    vals = [v for v in vals if not math.isnan(v)]
    return float(np.mean(vals)) if vals else None


def _point_rows(tuning: Tuning, lease: float, fraction: float | None,
                remedy: str | None = "none") -> list[dict[str, Any]]:
    """The valid runs at one point of the searches (the scale check's run apart); ``remedy`` None: any remedy."""
    f = fraction or 0.0
    return [r for r in tuning.rows if r["valid"] is not False and r["lease_prod"] == lease and r["phase"] != "scale"
            and float(r["heartbeat_fraction"]) == f and remedy in (None, r["remedy"])]


def point_figures(tuning: Tuning, lease: float, fraction: float | None, remedy: str = "none") -> dict[str, Any]:
    """The pooled figures of every run at one (lease, fraction, remedy), in production units."""
    plan = tuning.plan
    rows = _point_rows(tuning, lease, fraction, remedy)
    n = sum(int(r["tasks"]) for r in rows)
    k = sum(int(r["dup_lost_lease"] or 0) for r in rows)
    s5 = sum(int(r["dup_s5"] or 0) for r in rows)
    extra = sum(int(r["dup_extra"] or 0) for r in rows)
    lo, hi = wilson(k, n)
    wasted = sum(float(r["wasted_work_s"] or 0) for r in rows)
    # Recovery does not depend on the remedy: every run at this lease and heartbeat counts. A run sees a few
    # kills, so its p99 is about its longest; the runs' median p50 and their largest p99 are reported.
    kills = _point_rows(tuning, lease, fraction, None)
    p50s = [float(r["recovery_p50"]) for r in kills if r.get("recovery_p50") not in (None, "")]
    p99s = [float(r["recovery_p99"]) for r in kills if r.get("recovery_p99") not in (None, "")]
    rec50 = float(np.median(p50s)) if p50s else None
    rec99 = max(p99s) if p99s else None
    crash = 1000 * s5 / n * plan.crash_ratio() if n else None
    return {
        "runs": len(rows), "tasks": n, "lease_caused": k,
        "duplicates_per_1000": _r(1000 * k / n if n else None, 2), "duplicates_per_1000_lower": _r(1000 * lo, 2),
        "duplicates_per_1000_upper": _r(1000 * hi, 2),
        "crash_duplicates_per_1000": _r(crash, 3),
        "all_causes_per_1000_measured": _r(1000 * extra / n if n else None, 2),
        "all_causes_per_1000_upper_measured": _r(1000 * wilson(extra, n)[1], 2),
        "recovery_p50": _r(None if rec50 is None else rec50 * plan.scale),
        "recovery_p99": _r(None if rec99 is None else rec99 * plan.scale),
        "wasted_attempts_pct": _r(_mean(rows, "wasted_attempts_pct"), 2),
        "wasted_work_s_per_1000_tasks": _r(1000 * wasted * plan.scale / n if n else None),
    }


def evidence(search: Search | None, name: str, tuning: Tuning) -> list[dict[str, Any]]:
    """Each value a search tried: its pooled counts, its 95 % bounds and its state."""
    if search is None:
        return []
    out = []
    for i in search.tried():
        p = search.points[i]
        lo, hi = p.bounds()
        entry = {"search": name, "value": search.values[i], "runs": p.runs, "tasks": p.n, "lease_caused": p.k,
                 "per_1000": _r(1000 * p.k / p.n, 2), "lower": _r(1000 * lo, 2), "upper": _r(1000 * hi, 2),
                 "state": search.state(i)}
        if name == "fraction":
            entry["lease"] = tuning.phases["fraction"].lease
        at: dict[str, tuple[float, float | None]] = {
            "fixed": (search.values[i], None), "heartbeat": (search.values[i], HEARTBEAT_FRACTION),
            "fraction": (tuning.phases["fraction"].lease if name == "fraction" else 0.0, search.values[i])}
        lease, fraction = at[name]
        entry["recovery_p99"] = point_figures(tuning, lease, fraction)["recovery_p99"]
        out.append(entry)
    return out


def scale_check(tuning: Tuning) -> dict[str, Any] | None:
    """The runs at half the time scale against the same points at the tuning's scale: does each pair of 95 %
    intervals overlap? ``moves`` names a lease below the recommendation that passed only at half the scale."""
    rows = [r for r in tuning.rows if r["phase"] == "scale" and r["valid"] is not False]
    if not rows:
        return None
    points = []
    for lease, fraction in dict.fromkeys((r["lease_prod"], float(r["heartbeat_fraction"])) for r in rows):
        half = [r for r in rows if r["lease_prod"] == lease and float(r["heartbeat_fraction"]) == fraction]
        here = _point_rows(tuning, lease, fraction or None)
        n2, k2 = sum(int(r["tasks"]) for r in half), sum(int(r["dup_lost_lease"] or 0) for r in half)
        n1, k1 = sum(int(r["tasks"]) for r in here), sum(int(r["dup_lost_lease"] or 0) for r in here)
        (lo2, hi2), (lo1, hi1) = wilson(k2, n2), wilson(k1, n1)
        points.append({"lease": lease, "heartbeat_fraction": fraction or None, "tasks": n2, "lease_caused": k2,
                       "per_1000": _r(1000 * k2 / n2 if n2 else None, 2), "lower": _r(1000 * lo2, 2),
                       "upper": _r(1000 * hi2, 2), "here_lower": _r(1000 * lo1, 2), "here_upper": _r(1000 * hi1, 2),
                       "agrees": bool(lo2 <= hi1 and lo1 <= hi2)})
    target = tuning.plan.target / 1000
    recommended = points[0]["lease"]
    moves = [p["lease"] for p in points[1:] if p["upper"] is not None and p["upper"] <= 1000 * target
             and not p["agrees"]]
    return {"time_scale": tuning.plan.scale / 2, "runs": len(rows), "points": points,
            "agrees": all(p["agrees"] for p in points), "moves_to": moves[0] if moves else None,
            "recommended": recommended}


def library_settings(queue: str, lease: float | None, heartbeat: float | None) -> list[str] | None:
    """The recommendation in the library's own setting names (Celery's ``visibility_timeout``, RQ's
    ``job_monitoring_interval``), when the queue's adapter says how: its optional class attribute
    ``library_settings(lease, heartbeat) -> list of lines`` (docs/adapters.md). None otherwise, and for an
    ``exec:`` queue (its factory lives in another process) but arq's, BullMQ's and Bee-Queue's, which takeover
    knows by their adapter's file (takeover.adapters.arq, takeover.adapters.node_libraries)."""
    if lease is None:
        return None
    if bridge.is_exec(queue):
        if arq.is_arq(queue):
            return arq.library_settings(lease, heartbeat)
        return node_libraries.library_settings(queue, lease, heartbeat)  # BullMQ's, Bee-Queue's, or None
    try:
        factory = load_queue_factory(queue)
    except ContractError:
        return None
    translate = getattr(factory, "library_settings", None)
    if not callable(translate):
        return None
    return [str(line) for line in translate(lease, heartbeat)]


def tuning_json(tuning: Tuning, *, command: str, interrupted: bool, elapsed_s: float) -> dict[str, Any]:
    plan = tuning.plan
    violations = tuning.violations()
    lease, fraction = tuning.recommended()
    if violations:
        lease, fraction = None, None
    fig = point_figures(tuning, lease, fraction) if lease is not None else {}
    heartbeat = None if lease is None or fraction is None else _r(lease * fraction)
    per_day = None
    if plan.tasks_per_hour and fig:
        daily = plan.tasks_per_hour * 24 / 1000
        crash = fig["crash_duplicates_per_1000"] or 0.0
        per_day = {"tasks_per_hour": plan.tasks_per_hour,
                   "expected": _r(daily * ((fig["duplicates_per_1000"] or 0.0) + crash), 2),
                   "upper": _r(daily * ((fig["duplicates_per_1000_upper"] or 0.0) + crash), 2)}
    alternatives = {}
    fixed = tuning.phases["fixed"].search
    if fixed is not None and fixed.answer() is not None and not violations:
        alternatives["fixed"] = {"lease": fixed.answer(), "resolved": fixed.resolved(),
                                 **point_figures(tuning, fixed.answer() or 0.0, None)}
    hb = tuning.phases.get("heartbeat")
    if hb is not None and hb.search is not None and hb.search.answer() is not None and not violations:
        alternatives["heartbeat"] = {"lease": hb.search.answer(), "heartbeat_fraction": fraction,
                                     "resolved": hb.search.resolved(),
                                     **point_figures(tuning, hb.search.answer() or 0.0, fraction)}
    remedies: dict[str, Any] = {}
    if lease is not None:
        for remedy in ("none", "idempotency-key", "fencing"):
            f = point_figures(tuning, lease, fraction, remedy)
            if f["runs"]:
                remedies[remedy] = {k: f[k] for k in ("runs", "tasks", "all_causes_per_1000_measured",
                                                      "all_causes_per_1000_upper_measured",
                                                      "crash_duplicates_per_1000")}
                remedies[remedy]["lease_caused_per_1000"] = f["duplicates_per_1000"]
    times = plan.times
    return {
        "lease": lease, "heartbeat": heartbeat, "heartbeat_fraction": fraction if heartbeat is not None else None,
        "library_settings": library_settings(plan.queue, lease, heartbeat),
        "duplicates_per_1000": fig.get("duplicates_per_1000"),
        "duplicates_per_1000_upper": fig.get("duplicates_per_1000_upper"),
        "crash_duplicates_per_1000": fig.get("crash_duplicates_per_1000"),
        "duplicates_per_day": per_day,
        "recovery_p50": fig.get("recovery_p50"), "recovery_p99": fig.get("recovery_p99"),
        "wasted_work": {"attempts_pct": fig.get("wasted_attempts_pct"),
                        "seconds_per_1000_tasks": fig.get("wasted_work_s_per_1000_tasks")} if fig else None,
        "remedies": remedies,
        "alternatives": alternatives,
        "time_scale": plan.scale, "time_scale_derived": plan.scale_derived,
        "call_latency_ms": _r(1000 * plan.latency_s, 3),
        "stall_p99_ms": _r(1000 * plan.stall_s, 3), "stall_p99_production_s": _r(plan.stall_s * plan.scale, 3),
        "runs": len(tuning.rows), "tasks": sum(int(r["tasks"]) for r in tuning.rows),
        "resolved": tuning.resolved() and not interrupted,
        "target": plan.target, "budget_minutes": _r(plan.budget_s / 60, 2), "elapsed_s": _r(elapsed_s, 1),
        "interrupted": interrupted,
        "violations": [{"run_dir": v["run_dir"], "violated": v["violated"], "lease": v["lease_prod"],
                        "seed": v["seed"]} for v in violations],
        "queue": plan.queue, "has_extend": plan.has_extend, "seed": plan.seed,
        "task_times": {"file": plan.spec, "source": times.source, "read": times.n_read, "samples": len(times.samples),
                       "p50": _r(times.p50), "p90": _r(times.quantile(0.9)), "p99": _r(times.p99),
                       "max": _r(times.max), "mean": _r(times.mean)},
        "failures": {"crash_rate_per_hour": plan.failures.crash_rate_per_hour,
                     "lost_reply_rate": plan.failures.lost_reply_rate,
                     "pause_rate_per_hour": plan.failures.pause_rate_per_hour,
                     "pause_file": plan.failures.pause_file or None,
                     "run_kill_rate_per_s": _r(plan.kill_rate(), 4), "crash_ratio": _r(plan.crash_ratio(), 6)},
        # --hosts and the network faults, as given (production units) and as every run had them; only when given
        **({"network": {"given": plan.net, "runs": plan.network()}} if plan.net else {}),
        "searches": {name: {"stopped": ph.stopped,
                            "resolved": ph.search.resolved() if ph.search is not None else None,
                            "answer": ph.search.answer() if ph.search is not None else None,
                            "ladder": ph.search.values if ph.search is not None else None}
                     for name, ph in tuning.phases.items()},
        "evidence": [e for name, ph in tuning.phases.items() for e in evidence(ph.search, name, tuning)],
        "scale_check": scale_check(tuning),
        "command": command,
    }
