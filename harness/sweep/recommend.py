"""From sweep rows to cell means and the recommendation table.

Why means over seeds and fault scales: a recommendation is about the lease, so within a
distribution and mode every other axis is averaged; the CSV keeps each run for anyone who wants
the spread. "Duplicates" for choosing a lease are the ones a lease can cause or prevent
(``lost_lease``: a live holder outlived its lease); duplicates from a kill after the action (S5)
happen at any lease, and only a remedy removes them — that is the "left over" columns.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

NUMERIC = ["dup_per_1000", "lost_lease_per_1000", "s5_per_1000", "p_outlives_model", "outlived_observed",
           "recovery_p50", "recovery_p99", "expiry_to_takeover_p99", "throughput_per_s",
           "wasted_attempts_pct", "wasted_work_s",
           "p99_task_model", "p99_task_observed", "lease_over_p99", "performed", "deduplicated", "refused"]


def frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    for col in NUMERIC:
        if col in df:
            df[col] = pd.to_numeric(df[col], errors="coerce")
    return df


def cell_means(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (distribution, lease, remedy, heartbeat): means over seeds and fault scales."""
    keys = ["distribution", "lease", "remedy", "heartbeat_fraction"]
    cols = [c for c in NUMERIC if c in df]
    g = df.groupby(keys, sort=True)
    out = g[cols].mean()
    out["runs"] = g.size()
    out["violations"] = g["valid"].apply(lambda s: int((s.astype(str) == "False").sum()))
    return out.reset_index()


def _shortest(sub: pd.DataFrame, target: float) -> pd.Series | None:
    ok = sub[sub["lost_lease_per_1000"] <= target].sort_values("lease")
    return None if ok.empty else ok.iloc[0]


def recommendations(df: pd.DataFrame, target: float) -> list[dict[str, Any]]:
    """Per distribution: the shortest fixed lease and the shortest heartbeat lease under the target,
    their recovery latency, and what each remedy leaves over at the recommended lease."""
    means = cell_means(df)
    out = []
    for dist, sub in means.groupby("distribution", sort=False):
        fixed = sub[(sub["heartbeat_fraction"] == 0) & (sub["remedy"] == "none")]
        beat = sub[(sub["heartbeat_fraction"] > 0) & (sub["remedy"] == "none")]
        best_fixed = _shortest(fixed, target)
        best_beat = _shortest(beat, target)
        p99 = float(sub["p99_task_model"].iloc[0])
        row: dict[str, Any] = {
            "distribution": dist, "p99_task_s": round(p99, 3),
            "fixed_lease_s": None if best_fixed is None else float(best_fixed["lease"]),
            "fixed_recovery_p99_s": None if best_fixed is None else _round(best_fixed["recovery_p99"]),
            "fixed_dup_per_1000": None if best_fixed is None else _round(best_fixed["lost_lease_per_1000"]),
            "heartbeat_lease_s": None if best_beat is None else float(best_beat["lease"]),
            "heartbeat_every_s": None if best_beat is None else round(float(best_beat["lease"]
                                                                              * best_beat["heartbeat_fraction"]), 3),
            "heartbeat_recovery_p99_s": None if best_beat is None else _round(best_beat["recovery_p99"]),
            "heartbeat_dup_per_1000": None if best_beat is None else _round(best_beat["lost_lease_per_1000"]),
        }
        at = row["fixed_lease_s"] if row["fixed_lease_s"] is not None else float(sub["lease"].max())
        row["remedies_at_lease_s"] = at
        for remedy, rsub in sub[(sub["heartbeat_fraction"] == 0) & (sub["lease"] == at)].groupby("remedy"):
            row[f"left_{remedy}"] = _round(rsub["dup_per_1000"].mean())
        out.append(row)
    return out


def _round(x: Any) -> float | None:
    return None if x is None or pd.isna(x) else round(float(x), 2)
