"""One sweep row from one checked run folder: the numbers the sweep's plots and table need.

Why from the run folder: a cell is a real ``takeover stress`` run, checked by the same checker as
any run, so a sweep row can always be re-derived (and audited) from ``cells/<id>/`` alone.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from takeover._internal.checker.facts import Facts
from takeover._internal.config import RunConfig
from takeover._internal.pipeline import check_and_report
from takeover._internal.sweep.grid import Cell
from takeover._internal.sweep.model import p_outlives, quantile
from takeover._internal.sweep.wilson import wilson

ACTION_OVERHEAD = 0.005  # the action's round trip on 127.0.0.1, about, on top of the local step

COLUMNS = [
    "cell", "distribution", "dist", "mean", "spread", "max", "lease", "fault_scale", "remedy", "heartbeat_fraction",
    "heartbeat_s", "seed", "valid", "violated", "exit_code", "tasks", "dup_tasks", "dup_extra", "dup_s5",
    "dup_lost_lease", "dup_other", "dup_per_1000", "lost_lease_per_1000", "s5_per_1000", "performed",
    "deduplicated", "refused", "heartbeat_in_effect", "extends_ok", "extends_lost", "p99_task_model",
    "p99_task_observed", "lease_over_p99", "p_outlives_model", "outlived_observed", "recovery_n", "recovery_p50",
    "recovery_p99", "expiry_to_takeover_p99", "throughput_per_s", "claims",
    "wasted_attempts_pct", "wasted_work_s", "work_s",
    "takeovers", "uncertain", "elapsed_s", "run_dir",
    # 95% Wilson bounds of the three rates, per 1000 tasks, from this run's counts alone (the report pools
    # the seeds of a cell from dup_extra / dup_lost_lease / dup_s5 and tasks).
    "dup_per_1000_lo", "dup_per_1000_hi", "lost_lease_per_1000_lo", "lost_lease_per_1000_hi",
    "s5_per_1000_lo", "s5_per_1000_hi",
    # (added later) the power-loss rate of the run, the power losses recorded and the violations they explain
    "power_loss_rate", "power_losses", "power_loss_violations",
    # (added later) the clock faults of the run, and the extra actions only they caused (cause clock)
    "clock_skew_max", "clock_jump_rate", "dup_clock",
]

RATE_COUNTS = {"dup_per_1000": "dup_extra", "lost_lease_per_1000": "dup_lost_lease", "s5_per_1000": "dup_s5"}


def _r(x: Any, nd: int = 4) -> Any:
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else round(x, nd)


def orphan_recovery(fx: Facts) -> dict[str, Any]:
    """From each SIGKILL of a lease holder to the claim that took its task over (p50/p99, seconds).

    Why from the kill and not from the expiry: the person choosing a lease pays for the whole time
    the task sits orphaned, and most of it is the rest of the dead holder's lease.
    """
    f = fx.ops.faults
    kills = f[(f["f"] == "kill") & f["task"].notna() & f["gen"].notna()][["task", "gen", "t_inv"]]
    if not len(kills):
        return {"n": 0, "p50": None, "p99": None}
    m = kills.merge(fx.claims_ok[["task", "gen", "t_comp"]].rename(columns={"gen": "gen_c"}), on="task")
    m = m[(m["gen_c"] > m["gen"]) & (m["t_comp"] > m["t_inv"])]
    lat = (m.groupby(["task", "gen", "t_inv"])["t_comp"].min().reset_index().eval("t_comp - t_inv")).to_numpy()
    if not len(lat):
        return {"n": 0, "p50": None, "p99": None}
    p50, p99 = np.percentile(lat, [50, 99])
    return {"n": int(len(lat)), "p50": round(float(p50), 4), "p99": round(float(p99), 4)}


def cell_row(cell: Cell, cfg: RunConfig, run_dir: Path, elapsed: float) -> dict[str, Any]:
    """Check the run (summary.json is written, no reports: a sweep has hundreds of runs) and turn it into
    a sweep row."""
    result = check_and_report(run_dir, reports=False)
    summary, fx = result.summary, result.facts
    tt = cfg.task_time  # resolved: an empirical distribution's samples are read by now
    c, d = summary["counts"], summary["duplicates"]
    tasks = max(c["tasks"], 1)
    by = d["by_cause"]  # empty without a ledger
    rem, hb = summary["remedy"], summary["heartbeat"]
    # Work per attempt: from the claim's return to the action's invoke, same task/gen/process.
    claims = fx.claims_ok[["task", "gen", "process", "t_comp", "lease_until"]]
    acts = fx.ops.actions[["task", "gen", "process", "t_inv"]].dropna(subset=["task", "gen"])
    acts = acts.drop_duplicates(["task", "gen", "process"])
    m = claims.merge(acts, on=["task", "gen", "process"], how="left")
    work = (m["t_inv"] - m["t_comp"]).to_numpy(dtype="float64")
    finished = m.merge(fx.fin_acc[["task", "gen"]].drop_duplicates().assign(fin=True), on=["task", "gen"],
                       how="left")["fin"].eq(True).to_numpy()
    acted = ~np.isnan(work)
    lost = set()
    for frame in (fx.fin_rej, fx.ops.extends[fx.ops.extends["status"] == "fail"]):
        lost |= set(zip(frame["task"].to_numpy(dtype="float64"), frame["gen"].to_numpy(dtype="float64"),
                        strict=True))
    outlived = sum(1 for t, g in zip(m["task"], m["gen"], strict=True) if (t, g) in lost)
    violated = [name for name, inv in summary["invariants"].items() if inv["valid"] is False]
    p99_model = quantile(tt, 0.99)
    rec = orphan_recovery(fx)
    overhead = cfg.local_step + ACTION_OVERHEAD
    model_outlives = 0.0 if cfg.heartbeat else p_outlives(tt, cell.lease, overhead)
    n_claims = max(len(m), 1)
    row = {
        "cell": cell.cell_id, "distribution": cell.distribution.name, "dist": tt.dist, "mean": tt.mean,
        "spread": tt.spread, "max": tt.max, "lease": cell.lease, "fault_scale": cell.fault_scale,
        "remedy": cell.mode.remedy, "heartbeat_fraction": cell.mode.heartbeat, "heartbeat_s": cfg.heartbeat,
        "seed": cfg.seed, "valid": summary["valid"], "violated": ";".join(violated),
        "exit_code": summary["exit_code"], "tasks": tasks, "dup_tasks": d["tasks"] or 0,
        "dup_extra": d["extra_actions"] or 0, "dup_s5": by.get("s5", 0), "dup_lost_lease": by.get("lost_lease", 0),
        "dup_other": by.get("other", 0),
        "dup_per_1000": _r(1000 * (d["extra_actions"] or 0) / tasks, 2),
        "lost_lease_per_1000": _r(1000 * by.get("lost_lease", 0) / tasks, 2),
        "s5_per_1000": _r(1000 * by.get("s5", 0) / tasks, 2),
        "performed": rem["performed"], "deduplicated": rem["deduplicated"], "refused": rem["refused"],
        "heartbeat_in_effect": hb["in_effect"], "extends_ok": hb["extends"]["ok"],
        "extends_lost": hb["extends"]["lost"],
        "p99_task_model": _r(p99_model),
        "p99_task_observed": _r(np.percentile(work[acted], 99)) if acted.any() else None,
        "lease_over_p99": _r(cell.lease / p99_model if p99_model > 0 else float("inf"), 3),
        "p_outlives_model": _r(model_outlives, 5),
        "outlived_observed": _r(outlived / n_claims, 5),
        "recovery_n": rec["n"], "recovery_p50": rec["p50"], "recovery_p99": rec["p99"],
        "expiry_to_takeover_p99": (c.get("orphan_recovery_s") or {}).get("p99"),
        "throughput_per_s": c.get("throughput_per_s"), "claims": len(m),
        "wasted_attempts_pct": _r(100 * (~finished).sum() / n_claims, 2),
        "wasted_work_s": _r(np.nansum(work[acted & ~finished]), 3), "work_s": _r(np.nansum(work[acted]), 3),
        "takeovers": c.get("takeovers"), "uncertain": c.get("uncertain"), "elapsed_s": round(elapsed, 2),
        "run_dir": str(run_dir),
    }
    for rate, count in RATE_COUNTS.items():
        lo, hi = wilson(row[count], tasks)
        row[f"{rate}_lo"], row[f"{rate}_hi"] = _r(1000 * lo, 2), _r(1000 * hi, 2)
    power = summary.get("power_loss")
    row.update(power_loss_rate=cfg.power_loss_rate, power_losses=power["losses"] if power else 0,
               power_loss_violations=power["violations"] if power else 0)
    row.update(clock_skew_max=cfg.clock_skew_max, clock_jump_rate=cfg.clock_jump_rate, dup_clock=by.get("clock", 0))
    return row
