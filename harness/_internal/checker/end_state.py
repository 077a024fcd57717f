"""The two invariants judged on the queue's state rather than on single operations: the final snapshot (and
every mid-run probe) against what the history says (``state_matches_history``), and no registered task lost
after the drain (``no_lost_task``).

Why apart from :mod:`takeover._internal.checker.invariants`: these read the snapshot and the probes, where the rules
there read pairs of operations; each module is one kind of judgement. How indeterminate operations are
treated is the same everywhere (see that module's docstring): a violation only when every placement of
them breaks the rule.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from takeover._internal.checker import unknown_claims
from takeover._internal.checker.facts import Facts
from takeover._internal.checker.invariant_result import TERMINAL, Describe, InvariantResult, num, result_of
from takeover._internal.checker.probes import probe_violations
from takeover._internal.checker.resolves import last_word, reopen_epoch, reopened_at_end
from takeover.summary_types import UNKNOWN, Example


def _registered(fx: Facts) -> tuple[np.ndarray | None, str]:
    reg = fx.ops.registers
    if len(reg):
        return np.unique(reg["task"].dropna().to_numpy(dtype="float64")), ""
    return None, "the history has no register records: registered tasks are taken from the snapshot"


def _maybe_never_registered(fx: Facts) -> np.ndarray:
    """Tasks whose every registration's outcome is unknown (``info``, or no completion: a database that
    crashed under it) and that no claim ever returned: such a registration may never have happened,
    so the task may be absent from the queue (Jepsen's ``info``: the checker allows both)."""
    reg = fx.ops.registers
    if not len(reg):
        return np.zeros(0)
    ok = reg["status"].to_numpy(dtype=object) == "ok"
    tasks = reg["task"].to_numpy(dtype="float64")
    unsure = np.setdiff1d(tasks, tasks[ok])
    return np.setdiff1d(unsure, fx.claims_ok["task"].to_numpy(dtype="float64"))


def state_matches_history(fx: Facts) -> InvariantResult:
    """Every task's final (state, generation) follows from its operations, and so does every mid-run
    probe's (takeover._internal.checker.probes): a probe's violations come first, dated at the probe."""
    probed = probe_violations(fx)
    snap = fx.run.snapshot
    if snap is None:
        note = f"no snapshot ({fx.run.snapshot_error})"
        if len(probed):
            return result_of("state_matches_history", probed, _describe_state(fx), note, fx=fx, at="at")
        return InvariantResult("state_matches_history", UNKNOWN, 0, [], note=note)
    s = snap.copy()
    max_gen = fx.claims_ok.groupby("task", sort=False)["gen"].max().rename("max_gen")
    s = s.merge(max_gen, left_on="task", right_index=True, how="left")
    s["max_gen"] = s["max_gen"].fillna(0.0)
    # Problems as small integer codes (0 = none), texts at the end: one comparison of 125k
    # strings per rule would cost more than all the rules.
    texts: list[str] = [""]
    prob = np.zeros(len(s), dtype=np.int16)

    def flag(mask: Any, text: str) -> None:
        if text not in texts:
            texts.append(text)
        hit = np.asarray(mask, dtype=bool) & (prob == 0)
        prob[hit] = texts.index(text)

    # Factorized as object, not a Categorical: that would convert its categories (and on the way
    # all 125k states) to pandas' arrow string dtype first.
    state_codes, state_names = pd.factorize(s["state"].to_numpy(dtype=object))
    state_index = pd.Index(state_names, dtype=object)

    def state_is(*names: str) -> np.ndarray:
        return np.isin(state_codes, state_index.get_indexer(list(names)))

    flag(~state_is("pending", "running", *TERMINAL), "unknown state")
    flag(s["gen"].isna(), "no generation")
    flag(s["gen"] < s["max_gen"], "generation lower than one a claim returned")
    # Generations above the last one observed need indeterminate claims, one each, that may have taken them
    # after that claim was invoked (any time after it, unless the run knows when they ended:
    # takeover._internal.checker.unknown_claims).
    extra = (s["gen"] - s["max_gen"]).clip(lower=0).fillna(0).to_numpy(dtype=np.int64)
    if extra.sum() > len(fx.ind_claim_times) or (extra.any() and unknown_claims.bounded(fx)):
        over = extra > 0
        after = unknown_claims.taken_after(fx, s["task"].to_numpy()[over], s["max_gen"].to_numpy()[over])
        deficit = unknown_claims.unexplained(fx, after, np.full(int(over.sum()), np.inf), extra[over])
        mask = np.zeros(len(s), dtype=bool)
        mask[np.flatnonzero(over)[deficit > 0]] = True
        flag(mask, "generation above every claim, beyond what indeterminate claims explain")
    key = ["task", "gen"]
    acc = fx.fin_acc[["task", "gen", "outcome"]].assign(accepted=True)
    ind = fx.fin_ind[["task", "gen", "outcome"]].assign(accepted=False)
    # Only finishes after the task's last reopening count: a resolve back to pending undoes the
    # uncertain finish before it, as in single_finish (case retry_after_resolve_killed_while_running
    # in tests/quality/cases.py).
    epochs = reopen_epoch(fx, fx.fin_acc)
    last_epoch = reopen_epoch(fx, fx.fin_acc.assign(t_inv=np.inf))
    has_acc = s["task"].isin(fx.fin_acc.loc[epochs == last_epoch, "task"].to_numpy())
    # No drop_duplicates: a task is explained when any row matches, however many do.
    explains = pd.concat([acc, ind])
    # State and outcome compared as codes of the snapshot's states: as text, pandas would first
    # convert 125k strings on each side to its arrow string dtype. A missing state (-1) or an
    # outcome no state spells (-2) matches nothing, as None and NaN never equal anything.
    outcome_codes = state_index.get_indexer(pd.Index(explains["outcome"].to_numpy(dtype=object), dtype=object))
    explains = explains.assign(outcome=np.where(outcome_codes < 0, -2, outcome_codes))
    m = s[["task", "gen"]].assign(state=state_codes).reset_index().merge(explains, on=key)
    explained = np.zeros(len(s), dtype=bool)
    explained[m.loc[(m["state"] == m["outcome"]).to_numpy(dtype=bool), "index"].to_numpy(dtype=np.int64)] = True
    terminal = state_is(*TERMINAL)
    flag(terminal & ~explained, "terminal state no finish of that generation and outcome explains")
    flag(state_is("pending", "running") & has_acc.to_numpy(dtype=bool), "not terminal although a finish was accepted")
    gen = s["gen"].to_numpy(dtype="float64")
    flag(state_is("pending") & (gen > 0), "pending with a generation above 0")
    flag(state_is("running") & (gen < 1), "running with generation 0")
    # A running task's lease is the one its last claim set, unless a heartbeat moved it.
    lease = fx.claim_lease().rename("claim_lease")
    s = s.merge(lease, left_on=key, right_index=True, how="left")
    extended = s["task"].isin(fx.ops.extends["task"].dropna().to_numpy())
    flag(state_is("running") & s["claim_lease"].notna().to_numpy(dtype=bool) & ~extended.to_numpy(dtype=bool)
         & ~np.isclose(s["lease_until"].fillna(-1), s["claim_lease"], rtol=0, atol=1e-6),
         "lease_until differs from the one its claim returned")
    # Tasks whose last word is a resolve: the snapshot must show that resolution at its generation.
    lw = last_word(fx)
    if len(lw):
        r = s[["task", "gen", "state"]].reset_index().merge(lw, on="task", suffixes=("", "_r"))
        fits = (r["gen"] == r["gen_r"]) & ((r["state"] == r["resolution"])
                                           | (~r["certain"].astype(bool) & (r["state"] == "uncertain")))
        # A retry whose claim was killed mid-call may hold the task (case
        # retry_after_resolve_claim_killed_mid_call in tests/quality/cases.py).
        retry = (r["state"] == "running") & (r["gen"] > r["gen_r"]) & (r["gen"] <= r["gen_r"] + r["maybe_claims"])
        fits = (fits | retry).to_numpy(dtype=bool)
        # The resolve is the last word: it replaces whatever the finish-based rules above said.
        rows = r["index"].to_numpy(dtype=np.int64)
        prob[rows] = 0
        mask = np.zeros(len(s), dtype=bool)
        mask[rows[~fits]] = True
        flag(mask, "state or generation differs from its last resolve")
    bad = s[prob != 0].copy()
    bad["problem"] = pd.Series(np.asarray(texts, dtype=object)[prob[prob != 0]], index=bad.index, dtype=object)
    # Tasks the history knows but the snapshot lost (or invented).
    registered, _ = _registered(fx)
    seen = np.union1d(fx.claims_ok["task"].to_numpy(dtype="float64"),
                      registered if registered is not None else np.zeros(0))
    missing = np.setdiff1d(np.setdiff1d(seen, s["task"].to_numpy(dtype="float64")), _maybe_never_registered(fx))
    invented = (np.setdiff1d(s["task"].to_numpy(dtype="float64"), registered) if registered is not None
                else np.zeros(0))
    extra_rows = pd.DataFrame(
        [{"task": t, "problem": "missing from the snapshot", "state": None, "gen": np.nan, "max_gen": np.nan}
         for t in missing]
        + [{"task": t, "problem": "in the snapshot but never registered", "state": None, "gen": np.nan,
            "max_gen": np.nan} for t in invented])
    if len(extra_rows):
        bad = pd.concat([bad[["task", "problem", "state", "gen", "max_gen"]], extra_rows], ignore_index=True)
    if len(probed):  # the probes' first: the earliest evidence, and what the examples should show
        bad = pd.concat([probed, bad[["task", "problem", "state", "gen", "max_gen"]]], ignore_index=True)
        return result_of("state_matches_history", bad, _describe_state(fx), fx=fx, at="at")
    return result_of("state_matches_history", bad, _describe_state(fx))


def _describe_state(fx: Facts) -> Describe:
    """How a ``state_matches_history`` row reads; a probe's row also says which probe, when, and when
    the answer it goes back on was given."""

    def describe(rows: pd.DataFrame) -> list[Example]:
        # Each task's accepted finishes looked up once for all the rows, not one scan of them per row.
        fa = fx.fin_acc[fx.fin_acc["task"].isin(rows["task"].to_numpy())]
        fins: dict[float, list[list[Any]]] = {}
        for t, g, o, p in zip(fa["task"], fa["gen"], fa["outcome"], fa["process"], strict=True):
            fins.setdefault(float(t), []).append([num(g), o, num(p)])
        probe = rows["probe"].to_numpy(dtype="float64") if "probe" in rows else np.full(len(rows), np.nan)
        out: list[Example] = []
        for j, r in enumerate(rows.itertuples()):
            ex: Example = {"task": fx.name(r.task), "problem": r.problem, "state": r.state, "gen": num(r.gen),
                           "highest_claimed_gen": num(r.max_gen), "accepted_finishes": fins.get(float(r.task), [])}
            if not np.isnan(probe[j]):
                answered = float(r.answered)
                ex.update(probe=int(probe[j]), probe_at=fx.rel(r.at), answered_at=fx.rel(answered),
                          later_by=None if np.isnan(answered) else round(float(r.at) - answered, 3))
            out.append(ex)
        return out

    return describe


_LOST_PROBLEMS = ("", "missing from the snapshot", "not terminal after the drain",
                  "terminal but its action was never attempted")


def no_lost_task(fx: Facts) -> InvariantResult:
    """After the drain every registered task is terminal, and none is terminal without an attempt.

    An interrupted run never drained: the first half is then ``unknown`` (never a violation), the
    second half still applies."""
    snap = fx.run.snapshot
    if snap is None:
        return InvariantResult("no_lost_task", UNKNOWN, 0, [], note=f"no snapshot ({fx.run.snapshot_error})")
    registered, note = _registered(fx)
    registered = registered if registered is not None else np.unique(snap["task"].to_numpy(dtype="float64"))
    state = snap.drop_duplicates("task").set_index("task")
    reg = pd.DataFrame({"task": registered})
    reg = reg.merge(state, left_on="task", right_index=True, how="left")
    attempted = fx.ops.actions["task"].dropna().to_numpy(dtype="float64")
    if fx.run.ledger is not None:
        attempted = np.union1d(attempted, fx.run.ledger["task"].to_numpy(dtype="float64"))
    # Problems as codes into _LOST_PROBLEMS (0 = none), texts only on the bad rows: 125k-row
    # arrays of fixed-width text cost more than the whole rule.
    missing_state = reg["state"].isna().to_numpy(dtype=bool)
    reg = reg[~(missing_state & reg["task"].isin(_maybe_never_registered(fx)).to_numpy(dtype=bool))]
    missing_state = reg["state"].isna().to_numpy(dtype=bool)
    terminal = reg["state"].isin(TERMINAL).to_numpy(dtype=bool)
    never_attempted = ~reg["task"].isin(attempted).to_numpy(dtype=bool)
    problem = np.where(missing_state, 1, np.where(~terminal, 2, np.where(never_attempted, 3, 0))).astype(np.int8)
    retry = reg["task"].isin(reopened_at_end(fx)).to_numpy()
    awaiting = int((retry & (problem == 2)).sum())
    problem[retry & (problem == 2)] = 0
    if awaiting:
        note = (note + "; " if note else "") + f"{awaiting} task(s) resolved back to pending await a retry"
    unfinished = int((problem == 2).sum())
    if fx.interrupted:
        # No drain happened: an unfinished task may simply not have had its turn. Only the other
        # half (terminal without an attempted action, or lost from the queue) can still be judged.
        problem[problem == 2] = 0
        note = (note + "; " if note else "") + (
            f"the run was interrupted before its drain: {unfinished} task(s) not terminal, which proves "
            "nothing without a drain")
    bad = reg[problem != 0]
    bad = bad.assign(problem=pd.Series(np.asarray(_LOST_PROBLEMS, dtype=object)[problem[problem != 0]],
                                       index=bad.index, dtype=object))  # object: no arrow string conversion
    expected = fx.config.get("tasks")
    # Successful claims counted for the rows described only, not grouped over every claim.
    claim_tasks = fx.claims_ok["task"].to_numpy(dtype="float64")

    def describe(rows: pd.DataFrame) -> list[Example]:
        counted = pd.Series(claim_tasks[np.isin(claim_tasks, rows["task"].to_numpy(dtype="float64"))]).value_counts()
        return [{"task": fx.name(r.task), "problem": r.problem, "state": None if pd.isna(r.state) else r.state,
                 "gen": num(r.gen), "successful_claims": int(counted.get(r.task, 0))} for r in rows.itertuples()]

    res = result_of("no_lost_task", bad, describe, note)
    if isinstance(expected, int) and not len(fx.ops.registers) and len(snap) < expected:
        res.valid = False
        res.violations += expected - len(snap)
        # Tasks the history never named: one row each, with no id to give.
        unnamed = pd.DataFrame({"task": np.full(expected - len(snap), np.nan), "state": None, "gen": np.nan,
                                "problem": "missing from the snapshot"})
        res.found = pd.concat([bad[["task", "state", "gen", "problem"]], unnamed], ignore_index=True)
        res.note = (note + "; " if note else "") + f"the snapshot has {len(snap)} of {expected} tasks"
    if fx.interrupted and res.valid is True:
        res.valid = UNKNOWN
    return res
