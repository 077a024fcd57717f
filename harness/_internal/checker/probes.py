"""The mid-run snapshot probes judged against the history (``--probe-rate``, takeover._internal.run.probes).

Why: the final snapshot shows a lost commit or a reset row only after the drain, and the run's
operations may never show it at all. A probe is the queue's whole table read mid-run (the
contract's ``snapshot()``, from a process of its own); each is judged against what the queue had
acknowledged before the probe was invoked, so the evidence is dated at the probe, seconds earlier.

Only what is determinate is judged. A probe's read happened somewhere between its ``invoke`` and
its ``ok`` record; an answer the history holds happened before its own completion record. So an
answer whose completion precedes the probe's invoke is surely in the table the probe read, and
nothing else is taken as sure:

* ``not terminal although a finish was accepted``: an accepted finish of the task returned before
  the probe was invoked, and the probe shows the task ``pending`` or ``running``;
* ``generation lower than one a claim returned``: a claim returned a higher generation before the
  probe was invoked (generations never go down in the table);
* ``generation above every claim, beyond what indeterminate claims explain``: the probe's generation
  is above every generation a claim invoked before the probe's end returned, by more than the
  indeterminate claims (``info``, or killed mid-call: they name no task) invoked before it could
  have raised, counted per probe as the final snapshot counts them; on a run's own Redis server only
  those that could still reach the server after the claim below that generation was invoked
  (takeover._internal.checker.unknown_claims: a claim that answered took one generation, even if its client sent
  it twice);
* ``missing from the probe``: a registration returned before the probe was invoked, and the probe
  (one not sampled) has no row for the task.

Excused, never judged: an operation still in flight when the probe was invoked (it is not counted
as an answer); a probe that ended in ``info`` or never ended; a task with a resolve (reconciliation
may reopen it) invoked before the probe ended; and any answer with a power loss begun between it and
the probe's end (a power loss may take acknowledged commits back: that is judged once, by the final
snapshot and the operations, under the ``power_loss`` diagnosis, not again per probe).

The violations are ``state_matches_history``'s (the invariant's public name is kept), one row per
task and problem at the earliest probe that shows it, dated at that probe's invoke.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from takeover._internal.checker import unknown_claims
from takeover._internal.checker.facts import Facts, power_loss_between
from takeover._internal.checker.resolves import effective

TERMINAL = ("done", "uncertain")
NOT_TERMINAL = "not terminal although a finish was accepted"
LOWER = "generation lower than one a claim returned"
HIGHER = "generation above every claim, beyond what indeterminate claims explain"
MISSING = "missing from the probe"
# The columns of a probe violation, beside the final snapshot's (task, problem, state, gen, max_gen):
# the probe's number, its invoke (the violation's time), and the answer it contradicts (when it returned).
PROBE_COLUMNS = ("probe", "at", "answered")


def probe_operations(fx: Facts) -> pd.DataFrame:
    """One row per probe that returned rows: probe (number), t_inv, t_comp."""
    cached = getattr(fx, "_probe_ops", None)
    if cached is not None:
        return cached
    h = fx.run.history
    out = pd.DataFrame({"probe": pd.Series(dtype="float64"), "t_inv": pd.Series(dtype="float64"),
                        "t_comp": pd.Series(dtype="float64")})
    if len(h) and fx.run.probes is not None:
        is_probe = (h["f"] == "probe").to_numpy(dtype=bool)
        r = h.loc[is_probe, ["time", "type", "value"]]
        number = pd.to_numeric(r["value"].astype(object), errors="coerce").to_numpy(dtype="float64")
        kind = r["type"].astype(object).to_numpy()
        t = r["time"].to_numpy(dtype="float64")
        inv = pd.Series(t[kind == "invoke"], index=number[kind == "invoke"])
        ok = pd.Series(t[kind == "ok"], index=number[kind == "ok"])
        inv = inv[~inv.index.duplicated(keep="last") & ~np.isnan(inv.index)]
        ok = ok[~ok.index.duplicated(keep="first") & ~np.isnan(ok.index)]
        both = inv.index.intersection(ok.index)
        both = both[np.isin(both, fx.run.probes["probe"].to_numpy())]
        out = pd.DataFrame({"probe": both.to_numpy(dtype="float64"), "t_inv": inv[both].to_numpy(dtype="float64"),
                            "t_comp": ok[both].to_numpy(dtype="float64")})
        out = out[out["t_comp"] >= out["t_inv"]].sort_values("t_inv").reset_index(drop=True)
    fx._probe_ops = out  # type: ignore[attr-defined]
    return out


def _latest_before(rows: pd.DataFrame, answers: pd.DataFrame, value: str) -> pd.DataFrame:
    """Per row of ``rows`` (task, t_inv of its probe): the answer of its task whose completion came last
    before the probe was invoked, with its ``value`` and completion time (``answered``); rows without
    one are dropped."""
    a = answers[["task", "t_comp", value]].dropna(subset=["task", "t_comp"]).sort_values("t_comp")
    r = rows.reset_index(names="row").sort_values("t_inv")
    m = pd.merge_asof(r, a.rename(columns={"t_comp": "answered", value: "answer"}), left_on="t_inv",
                      right_on="answered", by="task", allow_exact_matches=False)
    return m.dropna(subset=["answered"])


def probe_violations(fx: Facts) -> pd.DataFrame:
    """Every probe's violations (see the module docstring): columns task, problem, state, gen, max_gen,
    probe, at, answered; one row per task and problem, at the earliest probe showing it."""
    cols = ["task", "problem", "state", "gen", "max_gen", *PROBE_COLUMNS]
    empty = pd.DataFrame({c: pd.Series(dtype=object if c in ("problem", "state") else "float64") for c in cols})
    ops = probe_operations(fx)
    if not len(ops):
        return empty
    rows = fx.run.probes.merge(ops, on="probe")  # type: ignore[union-attr]
    rows = rows.dropna(subset=["task"]).reset_index(drop=True)
    # Tasks a resolve may have reopened (or closed) before the probe ended: not judged.
    res = effective(fx)
    if len(res):
        first_res = res.groupby("task")["t_inv"].min()
        rows = rows[~(rows["task"].map(first_res) < rows["t_comp"]).to_numpy(dtype=bool)].reset_index(drop=True)
    found: list[pd.DataFrame] = []
    state = rows["state"].to_numpy(dtype=object)

    # A finish answered True before the probe: the task must be terminal in it.
    open_rows = rows[~np.isin(state, TERMINAL)]
    fin = _latest_before(open_rows[["task", "t_inv", "t_comp"]], fx.fin_acc, "gen")
    if len(fin):
        bad = open_rows.loc[fin["row"].to_numpy()].assign(answered=fin["answered"].to_numpy(),
                                                          max_gen=fin["answer"].to_numpy(), problem=NOT_TERMINAL)
        found.append(bad)

    # A claim's generation returned before the probe: the probe's may not be lower.
    claimed = fx.claims_ok[["task", "gen", "t_comp"]].sort_values("t_comp")
    claimed = claimed.assign(top=claimed.groupby("task")["gen"].cummax())
    gen_rows = rows[["task", "t_inv", "t_comp", "gen"]]
    low = _latest_before(gen_rows[["task", "t_inv"]], claimed, "top")
    if len(low):
        low = low[rows.loc[low["row"].to_numpy(), "gen"].to_numpy(dtype="float64") < low["answer"].to_numpy()]
        # When the highest generation was first returned: the answer the probe goes back on.
        first = claimed.drop_duplicates(["task", "gen"]).set_index(["task", "gen"])["t_comp"]
        at = first.reindex(pd.MultiIndex.from_arrays([low["task"], low["answer"]])).to_numpy(dtype="float64")
        found.append(rows.loc[low["row"].to_numpy()].assign(answered=at, max_gen=low["answer"].to_numpy(),
                                                            problem=LOWER))

    # Above every claim invoked before the probe ended, by more than that probe's indeterminate claims.
    found.append(_above_claims(fx, rows))

    # Registered before the probe, and absent from a probe that kept every row.
    found.append(_missing(fx, ops))

    found = [f for f in found if len(f)]
    if not found:
        return empty
    bad = pd.concat([f.reindex(columns=[*cols, "t_inv", "t_comp"]) for f in found], ignore_index=True)
    bad = bad[~power_loss_between(fx, bad["answered"], bad["t_comp"])[0]]
    bad = bad.assign(at=bad["t_inv"].to_numpy(dtype="float64"))
    bad = bad.sort_values("at", kind="stable").drop_duplicates(["task", "problem"]).reset_index(drop=True)
    return bad[cols]


def _above_claims(fx: Facts, rows: pd.DataFrame) -> pd.DataFrame:
    c = fx.claims_ok[["task", "gen", "t_inv"]].sort_values("t_inv")
    c = c.assign(top=c.groupby("task")["gen"].cummax())
    r = rows.reset_index(names="row").sort_values("t_comp")
    m = pd.merge_asof(r, c[["task", "t_inv", "top"]].rename(columns={"t_inv": "c_inv"}), left_on="t_comp",
                      right_on="c_inv", by="task", allow_exact_matches=False)
    top = m["top"].fillna(0.0).to_numpy(dtype="float64")
    excess = np.clip(m["gen"].to_numpy(dtype="float64") - top, 0, None)
    excess = np.nan_to_num(excess).astype(np.int64)
    if not excess.any():
        return rows.iloc[:0]
    m = m.assign(excess=excess, top=top)
    m = m[m["excess"] > 0]
    bad: list[int] = []
    for _, g in m.groupby("probe", sort=False):
        # Taken after the claim of the highest generation returned (or the registration), before the read.
        after = unknown_claims.taken_after(fx, g["task"].to_numpy(), g["top"].to_numpy())
        left = unknown_claims.unexplained(fx, after, g["t_comp"].to_numpy(dtype="float64"), g["excess"].to_numpy())
        bad += g["row"].to_numpy()[left > 0].tolist()
    if not bad:
        return rows.iloc[:0]
    hit = m.set_index("row").loc[bad]
    return rows.loc[bad].assign(max_gen=hit["top"].to_numpy(), answered=np.nan, problem=HIGHER)


def _missing(fx: Facts, ops: pd.DataFrame) -> pd.DataFrame:
    probes = fx.run.probes
    assert probes is not None
    totals = fx.run.probe_totals
    kept = probes.groupby("probe").size()
    whole = ops[[totals.get(int(p), 0) <= int(kept.get(p, 0)) for p in ops["probe"]]]
    regs = fx.ops.registers
    regs = regs[(regs["status"] == "ok").to_numpy(dtype=bool)].dropna(subset=["task", "t_comp"])
    if not len(whole) or not len(regs):
        return probes.iloc[:0]
    first = regs.groupby("task")["t_comp"].min().sort_values()
    times = first.to_numpy(dtype="float64")
    out: list[pd.DataFrame] = []
    for p in whole.itertuples():
        known = first.index.to_numpy()[: int(np.searchsorted(times, p.t_inv, side="left"))]
        seen = probes.loc[probes["probe"] == p.probe, "task"].to_numpy(dtype="float64")
        lost = np.setdiff1d(known, seen)
        if len(lost):
            out.append(pd.DataFrame({"task": lost, "problem": MISSING, "state": None, "gen": np.nan,
                                     "max_gen": np.nan, "probe": p.probe, "t_inv": p.t_inv, "t_comp": p.t_comp,
                                     "answered": first[lost].to_numpy(dtype="float64")}))
    return pd.concat(out, ignore_index=True) if out else probes.iloc[:0]
