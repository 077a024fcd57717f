"""From sweep rows to cell means and the recommendation table: what a sweep concludes.

Why means over seeds and fault scales: a recommendation is about the lease, so within a
distribution and mode every other axis is averaged; the CSV keeps each run for anyone who wants
the spread. "Duplicates" for choosing a lease are the ones a lease can cause or prevent
(``lost_lease``: a live holder outlived its lease); duplicates from a kill after the action (S5)
happen at any lease, and only a remedy removes them — that is the "left over" columns. Rates are
judged by their 95% Wilson upper bound, never by the point estimate alone (see ``shortest_lease``).

The conclusion is computed here, once (:func:`recommend`); ``takeover._internal.sweep.report`` only renders
it and the command only prints it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from takeover._internal.sweep.metrics import RATE_COUNTS
from takeover._internal.sweep.wilson import tasks_needed, wilson

NUMERIC = ["dup_per_1000", "lost_lease_per_1000", "s5_per_1000", "p_outlives_model", "outlived_observed",
           "recovery_p50", "recovery_p99", "expiry_to_takeover_p99", "throughput_per_s",
           "wasted_attempts_pct", "wasted_work_s",
           "p99_task_model", "p99_task_observed", "lease_over_p99", "performed", "deduplicated", "refused"]


@dataclass(frozen=True)
class Recommendation:
    """What a sweep's finished runs show: the cell means, the recommendation table (one row per
    task-time distribution, see :func:`recommend_from_means`) and the warnings about it."""

    runs: int  # runs that finished
    means: pd.DataFrame  # one row per (distribution, lease, remedy, heartbeat): see cell_means
    rows: list[dict[str, Any]]
    warnings: list[str]


def recommend(rows: list[dict[str, Any]], target: float) -> Recommendation | None:
    """The recommendation from the sweep's rows (as the runner made them or read back from sweep.csv),
    against ``target`` lease-caused duplicates per 1000 tasks; None when no run finished."""
    df = frame(rows)
    if df.empty:
        return None
    means = cell_means(df)
    recs = recommend_from_means(means, target)
    return Recommendation(len(df), means, recs, warnings(recs))


def frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Rows from the runner or read back from sweep.csv (all strings) -> typed columns."""
    df = pd.DataFrame(rows)
    for col in [*NUMERIC, "lease", "heartbeat_fraction", "fault_scale", "tasks", *RATE_COUNTS.values()]:
        if col in df:
            df[col] = pd.to_numeric(df[col], errors="coerce")
    return df


def cell_means(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (distribution, lease, remedy, heartbeat): means over seeds and fault scales, except
    the duplicate rates, which are pooled (summed counts over summed tasks) with their 95% Wilson
    bounds (``<rate>_lo`` / ``<rate>_hi``, per 1000) and the pooled task count ``n_tasks``."""
    keys = ["distribution", "lease", "remedy", "heartbeat_fraction"]
    cols = [c for c in NUMERIC if c in df]
    g = df.groupby(keys, sort=True)
    out = g[cols].mean()
    out["runs"] = g.size()
    out["violations"] = g["valid"].apply(lambda s: int((s.astype(str) == "False").sum()))
    if "tasks" in df:
        n = g["tasks"].apply(lambda s: int(pd.to_numeric(s, errors="coerce").fillna(0).sum()))
        out["n_tasks"] = n
        for rate, count in RATE_COUNTS.items():
            if count not in df:
                continue
            k = g[count].apply(lambda s: int(pd.to_numeric(s, errors="coerce").fillna(0).sum()))
            bounds = [wilson(kk, nn) for kk, nn in zip(k, n, strict=True)]
            out[rate] = [1000 * kk / nn if nn else float("nan") for kk, nn in zip(k, n, strict=True)]
            out[f"{rate}_lo"] = [1000 * b[0] for b in bounds]
            out[f"{rate}_hi"] = [1000 * b[1] for b in bounds]
    return out.reset_index()


def shortest_lease(sub: pd.DataFrame, target: float) -> dict[str, Any]:
    """The shortest lease whose lease-caused duplicates are under ``target`` (per 1000) by their 95%
    UPPER bound, at that lease and at every longer lease of ``sub`` (one distribution and mode).

    Why the upper bound: a point estimate of 0 in 160 tasks is compatible with 23 per 1000; only the
    bound says the target was shown. Why the closure over longer leases: a longer lease can only
    make an attempt less likely to outlive it, so a qualifying lease followed by a failing longer
    one is noise, and picking it would be reading the noise.

    Returns ``{"status": "ok" | "none" | "unresolvable", "row": the cell or None, "n": tasks per
    cell (fewest), "needed": tasks a cell needs to be able to show the target at 0 observed}``.
    """
    sub = sub.sort_values("lease")
    needed = tasks_needed(target / 1000)
    n = int(sub["n_tasks"].min()) if len(sub) else 0
    best = None
    for row in reversed([r for _, r in sub.iterrows()]):
        if row["lost_lease_per_1000_hi"] <= target:
            best = row
        else:
            break
    if best is not None:
        return {"status": "ok", "row": best, "n": n, "needed": needed}
    longest = sub.iloc[-1] if len(sub) else None
    resolvable = longest is not None and needed is not None and int(longest["n_tasks"]) >= needed
    return {"status": "none" if resolvable else "unresolvable", "row": longest, "n": n, "needed": needed}


def _verdict(found: dict[str, Any], target: float) -> str | None:
    """The table's words when no lease is recommended (None when one is)."""
    if found["status"] == "ok":
        return None
    r = found["row"]
    at = "" if r is None else (f" (at {float(r['lease']):g} s: {_round(r['lost_lease_per_1000'])}, 95% upper "
                               f"{_round(r['lost_lease_per_1000_hi'])})")
    if found["status"] == "none":
        return f"none shown under target{at}"
    need = "no finite number (target 0)" if found["needed"] is None else f">= {found['needed']}"
    return f"not resolvable with {found['n']} tasks per cell; needs {need}{at}"


def recommendations(df: pd.DataFrame, target: float) -> list[dict[str, Any]]:
    """Per distribution: the shortest fixed lease and the shortest heartbeat lease shown under the
    target (see ``shortest_lease``), their recovery latency, point estimate and 95% upper bound, and
    what each remedy leaves over at the recommended fixed lease (the longest lease when none)."""
    return recommend_from_means(cell_means(df), target)


def recommend_from_means(means: pd.DataFrame, target: float) -> list[dict[str, Any]]:
    out = []
    for dist, sub in means.groupby("distribution", sort=False):
        fixed = sub[(sub["heartbeat_fraction"] == 0) & (sub["remedy"] == "none")]
        f_found = shortest_lease(fixed, target)
        b_found: dict[str, Any] = {"status": "none", "row": None, "n": 0, "needed": tasks_needed(target / 1000)}
        for _, part in sub[(sub["heartbeat_fraction"] > 0) & (sub["remedy"] == "none")].groupby("heartbeat_fraction"):
            cand = shortest_lease(part, target)
            if (b_found["row"] is None or (cand["status"] == "ok" and (b_found["status"] != "ok" or float(
                    cand["row"]["lease"]) < float(b_found["row"]["lease"])))):
                b_found = cand
        p99 = float(sub["p99_task_model"].iloc[0])
        row: dict[str, Any] = {"distribution": dist, "p99_task_s": round(p99, 3)}
        for prefix, found in (("fixed", f_found), ("heartbeat", b_found)):
            ok = found["row"] if found["status"] == "ok" else None
            row[f"{prefix}_lease_s"] = None if ok is None else float(ok["lease"])
            row[f"{prefix}_verdict"] = _verdict(found, target) if found["row"] is not None else None
            if prefix == "heartbeat":
                every = None if ok is None else float(ok["lease"] * ok["heartbeat_fraction"])
                row["heartbeat_every_s"] = None if every is None else round(every, 3)
            row[f"{prefix}_recovery_p99_s"] = None if ok is None else _round(ok["recovery_p99"])
            row[f"{prefix}_dup_per_1000"] = None if ok is None else _round(ok["lost_lease_per_1000"])
            row[f"{prefix}_dup_hi_per_1000"] = None if ok is None else _round(ok["lost_lease_per_1000_hi"])
            row[f"{prefix}_status"] = found["status"] if found["row"] is not None else "absent"
            row[f"{prefix}_n"], row[f"{prefix}_needed"] = found["n"], found["needed"]
        at = row["fixed_lease_s"] if row["fixed_lease_s"] is not None else float(sub["lease"].max())
        row["remedies_at_lease_s"] = at
        for remedy, rsub in sub[(sub["heartbeat_fraction"] == 0) & (sub["lease"] == at)].groupby("remedy"):
            r = rsub.iloc[0]
            row[f"left_{remedy}"] = f"{_round(r['dup_per_1000'])} (<= {_round(r['dup_per_1000_hi'])})"
        out.append(row)
    return out


def warnings(recs: list[dict[str, Any]]) -> list[str]:
    """One line per recommendation the grid could not make because its cells are too small."""
    lines = []
    for r in recs:
        for prefix, what in (("fixed", "fixed lease"), ("heartbeat", "lease with heartbeat")):
            if r.get(f"{prefix}_status") == "unresolvable":
                lines.append(f"{r['distribution']}, {what}: {r[f'{prefix}_verdict']} - raise --tasks or --seeds, "
                             "or the target")
    return lines


def _round(x: Any) -> float | None:
    return None if x is None or pd.isna(x) else round(float(x), 2)
