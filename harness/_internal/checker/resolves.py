"""``resolve`` operations (reconciliation of ``uncertain``) as the invariants need to see them.

Why a module of its own: a resolve back to ``pending`` legitimately reopens a terminal task (a
retry may claim it with a higher generation and finish it again), and a resolve to ``done``
changes a task's final state without a finish. The invariants that reason about "terminal"
(no_reclaim_after_terminal, single_finish, state_matches_history, no_lost_task) ask these helpers
instead of each parsing resolves. An indeterminate resolve (``info`` or no completion) may have
taken effect: it excuses, like every indeterminate operation, but never proves.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from takeover._internal.checker.facts import Facts

_COLS = ["task", "gen", "resolution", "t_inv", "t_comp", "status"]


def resolves(fx: Facts) -> pd.DataFrame:
    """One row per resolve invoke: task (code), gen, resolution, times, status ok|fail|info|open."""
    cached = getattr(fx, "_resolves", None)
    if cached is not None:
        return cached
    h = fx.run.history
    f = h["f"]
    # Compare codes, not text: the history's ``f`` is categorical, and 1M strings cost seconds.
    is_resolve = (f == "resolve").to_numpy(dtype=bool) if len(h) else np.zeros(0, dtype=bool)
    if not is_resolve.any():
        out = pd.DataFrame({c: pd.Series(dtype="float64" if c in ("task", "gen", "t_inv", "t_comp") else object)
                            for c in _COLS})
    else:
        r = h[is_resolve]
        rows: list[dict] = []
        pending: dict[tuple, list[int]] = {}
        for rec in r.itertuples(index=False):
            key = (rec.process, rec.task, rec.gen)
            if rec.type == "invoke":
                pending.setdefault(key, []).append(len(rows))
                rows.append({"task": rec.task, "gen": rec.gen, "resolution": str(rec.value), "t_inv": rec.time,
                             "t_comp": np.nan, "status": "open"})
            elif pending.get(key):
                row = rows[pending[key].pop(0)]
                row["t_comp"] = rec.time
                row["status"] = str(rec.type)
        out = pd.DataFrame(rows, columns=_COLS)
    fx._resolves = out  # type: ignore[attr-defined]
    return out


def effective(fx: Facts, resolution: str | None = None) -> pd.DataFrame:
    """Resolves that took, or may have taken, effect."""
    r = resolves(fx)
    r = r[r["status"].isin(["ok", "info", "open"])]
    return r if resolution is None else r[r["resolution"] == resolution]


def _last_effective(fx: Facts) -> pd.DataFrame:
    """Each task's last effective resolve (by invoke time)."""
    return effective(fx).sort_values("t_inv", kind="stable").drop_duplicates("task", keep="last")


def reopened_between(fx: Facts, frame: pd.DataFrame, t_from: str, t_to: str) -> np.ndarray:
    """Per row of ``frame`` (a ``task`` column): did a resolve to pending fall between the two times?"""
    back = effective(fx, "pending")
    if not len(back) or not len(frame):
        return np.zeros(len(frame), dtype=bool)
    # Fixed names on the frame side: callers' "t_inv"/"t_comp" would collide with the resolve's.
    f = frame[["task", t_from, t_to]].set_axis(["task", "t_from", "t_to"], axis=1)
    f = f.reset_index(drop=True).reset_index(names="row")
    m = f.merge(back[["task", "t_inv", "t_comp"]], on="task")
    t_end = m["t_comp"].fillna(np.inf)
    hit = m.loc[(t_end > m["t_from"]) & (m["t_inv"] < m["t_to"]), "row"].unique()
    out = np.zeros(len(frame), dtype=bool)
    out[hit] = True
    return out


def reopen_epoch(fx: Facts, frame: pd.DataFrame, t_col: str = "t_inv") -> np.ndarray:
    """Per row: how many resolves to pending of its task came before ``t_col`` (a retry's epoch)."""
    back = effective(fx, "pending")
    if not len(back) or not len(frame):
        return np.zeros(len(frame), dtype=np.int64)
    f = frame[["task", t_col]].reset_index(drop=True).reset_index(names="row")
    m = f.merge(back[["task", "t_inv"]].rename(columns={"t_inv": "t_res"}), on="task")
    n = m[m["t_res"] < m[t_col]].groupby("row").size()
    out = np.zeros(len(frame), dtype=np.int64)
    out[n.index.to_numpy()] = n.to_numpy()
    return out


def last_word(fx: Facts) -> pd.DataFrame:
    """Tasks whose last operation is an effective resolve (no claim of theirs returned after it).

    Columns: task, gen, resolution, certain (the resolve returned ok), maybe_claims. For these the
    snapshot must show the resolution at the resolve's generation (or, if uncertain, possibly still
    ``uncertain``); after a resolve to ``pending``, each indeterminate claim invoked later (killed
    mid-call, or ``info``: its record names no task) may have taken the retry, so ``running`` at up to
    ``gen + maybe_claims`` also fits (case retry_after_resolve_claim_killed_mid_call in
    tests/quality/cases.py).
    """
    r = _last_effective(fx)
    if not len(r):
        return pd.DataFrame(columns=["task", "gen", "resolution", "certain", "maybe_claims"])
    last_claim = fx.ops.claims.groupby("task")["t_inv"].max()
    later = r["task"].map(last_claim).fillna(-np.inf) > r["t_inv"]
    r = r[~later.to_numpy(dtype=bool)]
    ind = fx.ind_claim_times
    maybe = len(ind) - np.searchsorted(ind, r["t_inv"].to_numpy(dtype="float64"), side="right")
    maybe = np.where((r["resolution"] == "pending").to_numpy(dtype=bool), maybe, 0)
    return pd.DataFrame({"task": r["task"].to_numpy(), "gen": r["gen"].to_numpy(),
                         "resolution": r["resolution"].to_numpy(), "certain": (r["status"] == "ok").to_numpy(),
                         "maybe_claims": maybe})


def reopened_at_end(fx: Facts) -> np.ndarray:
    """Task codes whose last effective resolve sent them back to ``pending``: whatever a retry did
    after it (claimed, killed, finished) happened after the drain, so the task awaits its retry."""
    r = _last_effective(fx)
    return r.loc[r["resolution"] == "pending", "task"].to_numpy(dtype="float64")
