"""The eight invariants (public names), each a few vectorized joins over :class:`Facts`.

How indeterminate operations are treated, everywhere: an operation took effect somewhere between
its invoke and its completion; an ``info`` or ``open`` one at any time after its invoke, or never.
A violation is reported only when *every* way of placing those operations breaks the rule, so
clock readings from different processes (written after a call returns, before the next starts)
can only make the checker more lenient, never raise a false alarm. ``now`` is the value the queue
was given and judged leases by, so lease comparisons use ``now``, not record times.

The six rules over operations are here; the two judged on the queue's state (the final snapshot and the
probes against the history) are in :mod:`takeover._internal.checker.end_state`, and what each concludes is an
:class:`~takeover._internal.checker.invariant_result.InvariantResult`. :data:`INVARIANTS` lists all eight, in the
order summary.json has them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from takeover._internal.checker import unknown_claims
from takeover._internal.checker.end_state import no_lost_task, state_matches_history
from takeover._internal.checker.facts import Facts
from takeover._internal.checker.invariant_result import InvariantResult, num, result_of, suffixed
from takeover._internal.checker.resolves import reopen_epoch, reopened_between
from takeover.summary_types import Example


def no_stale_commit(fx: Facts) -> InvariantResult:
    """An accepted finish whose generation is below one claimed before it returned.

    A higher generation surely claimed before the finish started is the plain case. One still in
    flight with the finish counts too (case stale_finish_overlapping_the_takeover in
    tests/quality/cases.py): if the finish took effect first, a done task was handed out again, if
    the claim did, the finish was stale; a correct queue refuses one of the two. Only a resolve back
    to pending between them excuses it."""
    fa = suffixed(fx.fin_acc[["i", "task", "gen", "t_inv", "t_comp", "process", "outcome"]], "_f")
    c = suffixed(fx.claims_ok[["task", "gen", "t_inv", "t_comp", "process"]], "_c")
    m = fa.merge(c, on="task")
    m = m[(m["gen_c"] > m["gen_f"]) & (m["t_inv_c"] < m["t_comp_f"])]
    bad = m[~reopened_between(fx, m, "t_inv_f", "t_comp_c")]
    bad = bad.sort_values("gen_c").drop_duplicates("i_f", keep="last").sort_values("t_inv_f")
    def describe(rows: pd.DataFrame) -> list[Example]:
        return [{"task": fx.name(r.task), "finish_gen": num(r.gen_f), "outcome": r.outcome_f,
                 "finish_by": num(r.process_f), "finish_at": fx.rel(r.t_inv_f), "claimed_gen": num(r.gen_c),
                 "claimed_by": num(r.process_c), "claimed_at": fx.rel(r.t_comp_c)} for r in rows.itertuples()]

    return result_of("no_stale_commit", bad, describe, fx=fx, at="t_inv_f")


def _plausible_ind_extends(fx: Facts) -> pd.DataFrame:
    """The indeterminate extends that may have moved a lease: those invoked (judged at their
    ``now``) before the lease they would extend had run out. A correct queue answers ``lost`` to a
    later one, so it cannot excuse a late finish (case late_info_extend_does_not_excuse_a_late_finish
    in tests/quality/cases.py). The lease an extend sees is at most its claim's, any successful
    extend's invoked before it, and ``now + lease`` of each earlier plausible indeterminate one; only
    those few extends are walked one by one."""
    cached = getattr(fx, "_plausible_ext", None)
    if cached is not None:
        return cached
    e = fx.ext_ind[["task", "gen", "now", "t_inv"]].reset_index(drop=True)
    if len(e):
        e = e.reset_index(names="row")
        lease = fx.claim_lease().rename("claim_lease")
        upper = e.merge(lease, left_on=["task", "gen"], right_index=True, how="left")["claim_lease"]
        upper = upper.to_numpy(dtype="float64").copy()
        if len(fx.ext_ok):
            m = e.merge(fx.ext_ok[["task", "gen", "t_inv", "lease_until_c"]].rename(columns={"t_inv": "o_inv"}),
                        on=["task", "gen"])
            m = m[m["o_inv"] < m["t_inv"]].groupby("row")["lease_until_c"].max()
            upper[m.index.to_numpy()] = np.fmax(upper[m.index.to_numpy()], m.to_numpy(dtype="float64"))
        step = fx.lease if fx.lease is not None else np.inf
        extra: dict[tuple[float, float], float] = {}
        keep = np.zeros(len(e), dtype=bool)
        for row in np.argsort(e["t_inv"].to_numpy(dtype="float64"), kind="stable"):
            key = (float(e.at[row, "task"]), float(e.at[row, "gen"]))
            now = float(e.at[row, "now"])
            up = max(upper[row], extra.get(key, -np.inf))
            # No lease known (no claim returned it): leave it to the other checks, never flag on it.
            if np.isnan(upper[row]) or np.isnan(now) or now < up:
                keep[row] = True
                extra[key] = max(extra.get(key, -np.inf), now + step)
        e = e[keep].drop(columns="row")
    fx._plausible_ext = e  # type: ignore[attr-defined]
    return e


def extended_leases(fx: Facts, rows: pd.DataFrame, before_col: str,
                     ext_ok: pd.DataFrame | None = None) -> tuple[pd.Series, pd.Series]:
    """For each row (task, gen, key ``rid``): the latest lease an ``extend`` surely set before
    ``before_col``, and whether an indeterminate extend may have moved it. ``ext_ok``: the successful
    extends to read (default ``fx.ext_ok``; the duplicate causes pass them with leases on the real clock)."""
    ext_ok = fx.ext_ok if ext_ok is None else ext_ok
    ext_max = pd.Series(np.nan, index=rows["rid"])
    maybe = pd.Series(False, index=rows["rid"])
    # The row side is renamed to ``before``: callers pass "t_inv" or "t_comp", which the extend
    # side also carries, and a merge would suffix both: a KeyError on every run with an
    # indeterminate heartbeat (case killed_mid_extend_then_taken_over in tests/quality/cases.py).
    left = rows[["rid", "task", "gen", before_col]].rename(columns={before_col: "before"})
    if len(ext_ok):
        m = left.merge(ext_ok[["task", "gen", "t_comp", "lease_until_c"]], on=["task", "gen"])
        m = m[m["t_comp"] < m["before"]]
        ext_max = ext_max.combine_first(m.groupby("rid")["lease_until_c"].max()).reindex(rows["rid"])
    ind = _plausible_ind_extends(fx)
    if len(ind):
        m = left.merge(ind[["task", "gen", "t_inv"]], on=["task", "gen"])
        hit = m.loc[m["t_inv"] < m["before"], "rid"].unique()
        maybe = pd.Series(rows["rid"].isin(hit).to_numpy(), index=rows["rid"])
    return ext_max, maybe


def finish_within_lease(fx: Facts) -> InvariantResult:
    """An accepted finish called with ``now >= lease_until`` of its own claim (extends included)."""
    fa = fx.fin_acc[["i", "task", "gen", "now", "t_inv", "process", "outcome"]].rename(columns={"i": "rid"})
    lease = fx.claim_lease().rename("claim_lease")
    fa = fa.merge(lease, left_on=["task", "gen"], right_index=True, how="left")
    ext_max, maybe = extended_leases(fx, fa, "t_inv")
    eff = np.fmax(fa["claim_lease"].to_numpy(dtype="float64"), ext_max.to_numpy(dtype="float64"))
    fa["eff"] = eff
    known = ~np.isnan(eff) & ~maybe.to_numpy(dtype=bool)
    late = known & (fa["now"].to_numpy(dtype="float64") >= eff)
    # A worker finishes only a generation one of its own claims returned (it writes the claim's ok
    # record before it can call finish; a claim cut by SIGKILL left a dead process that finishes
    # nothing). An accepted finish of any other generation held no lease at all (case
    # finish_of_a_generation_nobody_was_given in tests/quality/cases.py).
    own = fx.claims_ok[["task", "gen", "process"]].drop_duplicates().assign(own=True)
    held = fa[["task", "gen", "process"]].merge(own, on=["task", "gen", "process"], how="left")["own"]
    unheld = held.isna().to_numpy(dtype=bool)
    # The problem text only on the (few) bad rows: 100k+ strings would be converted for nothing.
    keep = late | unheld
    bad = fa[keep]
    bad = bad.assign(problem=pd.Series(np.where(unheld[keep], "no claim of this process returned that generation",
                                                "finished after its lease"), index=bad.index, dtype=object))
    bad = bad.sort_values("t_inv")
    def describe(rows: pd.DataFrame) -> list[Example]:
        return [{"task": fx.name(r.task), "gen": num(r.gen), "outcome": r.outcome, "finish_by": num(r.process),
                 "problem": r.problem, "now": fx.rel(r.now), "lease_until": fx.rel(r.eff),
                 "late_by": None if np.isnan(r.eff) else round(float(r.now - r.eff), 3)}
                for r in rows.itertuples()]

    return result_of("finish_within_lease", bad, describe, fx=fx, at="t_inv")


def no_reclaim_after_terminal(fx: Facts) -> InvariantResult:
    """A successful claim invoked after an accepted finish of that task had returned."""
    fa = suffixed(fx.fin_acc[["task", "gen", "outcome", "t_comp", "process"]], "_f")
    c = suffixed(fx.claims_ok[["i", "task", "gen", "now", "t_inv", "t_comp", "process"]], "_c")
    m = c.merge(fa, on="task")
    m = m[m["t_inv_c"] > m["t_comp_f"]]
    m = m[~reopened_between(fx, m, "t_comp_f", "t_inv_c")]  # a resolve back to pending reopens it
    bad = m.sort_values("t_comp_f").drop_duplicates("i_c").sort_values("t_inv_c")
    def describe(rows: pd.DataFrame) -> list[Example]:
        return [{"task": fx.name(r.task), "finished_gen": num(r.gen_f), "outcome": r.outcome_f,
                 "finished_by": num(r.process_f), "finished_at": fx.rel(r.t_comp_f), "reclaimed_gen": num(r.gen_c),
                 "reclaimed_by": num(r.process_c), "reclaimed_at": fx.rel(r.t_inv_c)} for r in rows.itertuples()]

    return result_of("no_reclaim_after_terminal", bad, describe, fx=fx, at="t_inv_c")


def _claims_by_gen(fx: Facts) -> pd.DataFrame:
    """Successful claims sorted by (task, gen, t_inv), with the previous claim's gen: sorted once,
    shared by generation_monotonic and lease_exclusive (a shallow copy each, so the columns one
    adds never reach the other)."""
    cached = getattr(fx, "_claims_by_gen", None)
    if cached is None:
        c = fx.claims_ok[["i", "task", "gen", "now", "lease_until", "t_inv", "t_comp", "process"]]
        c = c.sort_values(["task", "gen", "t_inv"], kind="stable").reset_index(drop=True)
        same = c["task"].eq(c["task"].shift())
        c["prev_gen"] = c["gen"].shift().where(same, 0.0)
        cached = fx._claims_by_gen = c  # type: ignore[attr-defined]
    return cached.copy(deep=False)


# generation_monotonic's problems by code (0: none); object, not numpy text: no arrow string conversion.
_GEN_PROBLEMS = np.array(["", "duplicate generation", "generation went back in time", "unexplained gap"], dtype=object)


def generation_monotonic(fx: Facts) -> InvariantResult:
    """Claims of a task: distinct generations, increasing in real-time order, gaps only where an
    indeterminate claim may have taken the missing generation."""
    c = _claims_by_gen(fx)
    same = c["task"].eq(c["task"].shift())
    prev = c[["gen", "process", "t_comp", "t_inv"]].shift()
    dup = same & c["gen"].eq(prev["gen"])
    # Order: a claim with a lower generation must not have started after a higher one returned.
    rev = c.iloc[::-1]
    later_min = rev.groupby("task", sort=False)["t_comp"].cummin().groupby(rev["task"], sort=False).shift()
    later_min = later_min.iloc[::-1]
    gen_higher_rev = rev.groupby("task", sort=False)["gen"].cummax().groupby(rev["task"], sort=False).shift()
    inverted = (c["t_inv"] > later_min) & (gen_higher_rev.iloc[::-1] > c["gen"])
    missing = (c["gen"] - c["prev_gen"] - 1).clip(lower=0).where(~dup, 0).to_numpy(dtype="float64")
    has_gap = missing > 0
    left = np.zeros(len(c), dtype=np.int64)
    if has_gap.any():
        # The missing generations were taken after the claim below them was invoked (the registration, below
        # generation 1) and before the claim above them returned (takeover._internal.checker.unknown_claims).
        below = unknown_claims.taken_after(fx, c["task"].to_numpy()[has_gap], c["prev_gen"].to_numpy()[has_gap])
        left[has_gap] = unknown_claims.unexplained(fx, below, c["t_comp"].to_numpy()[has_gap],
                                                   missing[has_gap].astype(np.int64))
    gap_bad = left > 0
    unexplained_total = int(left.sum())
    # The problem as a code per claim, its words and the columns beside it only on the bad rows: as text on
    # every claim, 125k strings on the check_1m history (and a numpy array of 29-character ones before them,
    # 15 MB) were most of this rule's peak.
    kind = np.select([dup.to_numpy(dtype=bool), inverted.to_numpy(dtype=bool), gap_bad], [1, 2, 3], 0)
    is_bad = kind > 0
    bad = c[is_bad]
    # A claim both duplicate and inverted is one bad claim (tests/quality/test_violation_counts.py);
    # a gap is one violation per generation it leaves unexplained.
    bad = bad.assign(kind=pd.Series(_GEN_PROBLEMS[kind[is_bad]], index=bad.index, dtype=object),
                     prev_process=prev["process"].where(same)[is_bad], prev_t=prev["t_comp"].where(same)[is_bad],
                     prev_t_inv=prev["t_inv"].where(same)[is_bad],
                     weight=((dup | inverted).to_numpy(dtype=np.int64) + left)[is_bad]).sort_values("t_inv")

    def describe(rows: pd.DataFrame) -> list[Example]:
        return [{"task": fx.name(r.task), "problem": r.kind, "gen": num(r.gen), "previous_gen": num(r.prev_gen),
                 "claimed_by": num(r.process), "claimed_at": fx.rel(r.t_inv), "previous_by": num(r.prev_process),
                 "previous_at": fx.rel(r.prev_t)} for r in rows.itertuples()]

    violations = int((dup | inverted).sum()) + unexplained_total
    res = result_of("generation_monotonic", bad, describe,
                  f"{unexplained_total} generation(s) skipped beyond what {len(fx.ind_claim_times)} "
                  f"indeterminate claim(s) can explain" if unexplained_total else "", fx=fx, at="t_inv",
                  found=bad.loc[bad.index.repeat(bad["weight"].to_numpy())])
    res.violations = violations
    res.valid = violations == 0
    return res


def _stale_extends(fx: Facts) -> pd.DataFrame:
    """Accepted heartbeats of a stale generation, as lease_exclusive's pairs: an ``extend`` that returned
    a lease for generation g although a claim of a higher generation of the task had surely returned
    before the extend began (its ok record written before the extend's invoke), and that newer holder
    had not surely finished by then (nor was the task reopened in between).

    Why this breaks one holder at a time: the heartbeat answers the stale holder that it holds the task
    until the new ``lease_until``, while the generation a claim granted last holds it too; the stale
    holder then acts on it. A correct queue renews only the current generation (the contract's extend),
    so it never answers one of these, whatever the clocks say: nothing here compares ``now`` values of
    two processes. (Case stale_heartbeat_accepted in tests/quality/cases.py.)"""
    e = fx.ext_ok[["i", "task", "gen", "now", "t_inv", "t_comp", "process", "lease_until_c"]]
    c = fx.claims_ok[["i", "task", "gen", "lease_until", "t_inv", "t_comp", "process"]]
    if not len(e) or not len(c):
        return pd.DataFrame()
    m = e.merge(c, on="task", suffixes=("", "_n"))
    m = m[(m["gen_n"] > m["gen"]) & (m["t_comp_n"] < m["t_inv"])]
    if not len(m):
        return pd.DataFrame()
    # The newest such claim stands for them all: one violation per accepted extend.
    m = m.sort_values("gen_n").drop_duplicates("i", keep="last").reset_index(drop=True)
    fin = fx.fin_acc[["task", "gen", "t_comp"]].rename(columns={"gen": "gen_n", "t_comp": "f_comp"})
    done = m[["i", "task", "gen_n", "t_inv"]].merge(fin, on=["task", "gen_n"])
    done = done.loc[done["f_comp"] < done["t_inv"], "i"].to_numpy()
    m = m[~m["i"].isin(done).to_numpy() & ~reopened_between(fx, m, "t_comp_n", "t_inv")]
    if not len(m):
        return pd.DataFrame()
    rows = m.assign(rid=m["i"].to_numpy(), gen=m["gen_n"].to_numpy())
    ext = extended_leases(fx, rows, "t_inv")[0].to_numpy(dtype="float64")
    p_eff = np.fmax(m["lease_until"].to_numpy(dtype="float64"), ext)
    return pd.DataFrame({
        "task": m["task"].to_numpy(), "gen": m["gen"].to_numpy(), "now": m["now"].to_numpy(),
        "t_inv": m["t_inv"].to_numpy(), "t_comp": m["t_comp"].to_numpy(), "process": m["process"].to_numpy(),
        "lease_until": m["lease_until_c"].to_numpy(), "p_gen": m["gen_n"].to_numpy(),
        "p_t_inv": m["t_inv_n"].to_numpy(), "p_t_comp": m["t_comp_n"].to_numpy(),
        "p_process": m["process_n"].to_numpy(), "rid": m["i_n"].to_numpy(), "p_eff": p_eff,
        "at": m["t_inv"].to_numpy(), "stale_extend": True,
    })


def lease_exclusive(fx: Facts) -> InvariantResult:
    """A claim granted (judged at its ``now``) while the previous grant's lease was still valid; or a
    heartbeat that renewed a stale generation's lease while a newer one held the task (:func:`_stale_extends`)."""
    c = _claims_by_gen(fx)
    prev = c.shift()
    same = c["task"].eq(prev["task"])
    pairs = pd.DataFrame({
        "task": c["task"], "gen": c["gen"], "now": c["now"], "t_inv": c["t_inv"], "t_comp": c["t_comp"],
        "process": c["process"], "lease_until": c["lease_until"],
        "p_gen": prev["gen"], "p_now": prev["now"], "p_lease": prev["lease_until"], "p_t_inv": prev["t_inv"],
        "p_t_comp": prev["t_comp"], "p_process": prev["process"], "rid": prev["i"],
    })[same]
    # Every step counts, not only 0 and 1: a gap left by an indeterminate claim does not excuse a
    # grant inside the older lease (case lease_granted_across_an_info_claim in tests/quality/cases.py).
    def describe(rows: pd.DataFrame) -> list[Example]:
        return [{"task": fx.name(r.task), "held_gen": num(r.p_gen), "held_by": num(r.p_process),
                 "lease_until": fx.rel(r.p_eff), "granted_gen": num(r.gen), "granted_to": num(r.process),
                 "granted_now": fx.rel(r.now), "overlap_s": round(float(r.p_eff - r.now), 3)}
                for r in rows.itertuples()]

    stale = _stale_extends(fx)
    if len(pairs) == 0 and len(stale) == 0:
        return result_of("lease_exclusive", pairs, describe)
    if len(pairs) == 0:
        return result_of("lease_exclusive", stale.sort_values("t_inv"), describe, fx=fx, at="at")
    # The previous lease, as extended by heartbeats surely done before this claim started.
    ext = extended_leases(fx, pairs.assign(task=pairs["task"], gen=pairs["p_gen"]), "t_inv")[0]
    p_eff = np.fmax(pairs["p_lease"].to_numpy(dtype="float64"), ext.to_numpy(dtype="float64"))
    # A lease ends early when its holder's finish surely returned before this claim started (a
    # claim then is no_reclaim_after_terminal's to judge), or when a resolve back to pending came
    # between a finish and this claim. A finish that may have taken effect (info, killed, or still
    # in flight when the claim started) does not: if it did, the claim reclaimed a terminal task,
    # if not, it was granted inside the lease; a violation either way (cases
    # lease_granted_after_an_info_finish and lease_granted_after_a_killed_finish in tests/quality/cases.py).
    fin = pd.concat([fx.fin_acc[["task", "gen", "t_inv", "t_comp"]].assign(acc=True),
                     fx.fin_ind[["task", "gen", "t_inv"]].assign(t_comp=np.nan, acc=False)])
    m = pairs[["rid", "task", "p_gen", "t_inv", "t_comp"]].merge(
        fin.rename(columns={"t_inv": "f_inv", "t_comp": "f_comp"}), left_on=["task", "p_gen"],
        right_on=["task", "gen"])
    m = m[m["f_inv"] < m["t_comp"]]
    done_before = (m["acc"] & (m["f_comp"] < m["t_inv"])).to_numpy(dtype=bool)
    reopened = reopened_between(fx, m, "f_inv", "t_comp")
    released = m.loc[done_before | reopened, "rid"].to_numpy()
    not_released = ~pairs["rid"].isin(released).to_numpy()
    now = pairs["now"].to_numpy(dtype="float64")
    p_now = pairs["p_now"].to_numpy(dtype="float64")
    lease_until = pairs["lease_until"].to_numpy(dtype="float64")
    later_in_gen = (pairs["gen"] > pairs["p_gen"]).to_numpy()
    prev_first = (pairs["p_t_comp"] < pairs["t_inv"]).to_numpy()
    this_first = (pairs["t_comp"] < pairs["p_t_inv"]).to_numpy()
    overlap_this_after = now < p_eff
    overlap_prev_after = p_now < lease_until
    viol = np.where(later_in_gen | prev_first, overlap_this_after,
                    np.where(this_first, overlap_prev_after, overlap_this_after & overlap_prev_after))
    pairs["p_eff"] = p_eff
    # The double grant exists once both grants were asked for: the later invoke of the two. Not
    # always this claim's, since pairs go by generation: when a queue hands out a lower generation
    # after a higher one (a reset), the pair's first claim is the later one (case
    # reregister_then_claim_with_the_generation_back in tests/quality/cases.py).
    pairs["at"] = np.fmax(pairs["t_inv"].to_numpy(dtype="float64"), pairs["p_t_inv"].to_numpy(dtype="float64"))
    bad = pairs[viol & not_released]
    if len(stale):
        bad = pd.concat([bad.assign(stale_extend=False), stale], ignore_index=True)
    bad = bad.sort_values("t_inv")
    return result_of("lease_exclusive", bad, describe, fx=fx, at="at")


def single_finish(fx: Facts) -> InvariantResult:
    """More than one accepted finish for a task."""
    fa = fx.fin_acc
    # A resolve back to pending starts a new epoch: the retry's finish is that epoch's only one.
    counts = fa.groupby([fa["task"], reopen_epoch(fx, fa)], sort=False)["i"].transform("size")
    bad_rows = fa[counts > 1].sort_values(["task", "t_inv"])
    per_task = bad_rows.groupby("task", sort=False).agg(
        n=("i", "size"), gens=("gen", lambda s: [int(x) for x in s]),
        outcomes=("outcome", lambda s: [str(x) for x in s]),
        processes=("process", lambda s: [int(x) for x in s]),
        at=("t_inv", lambda s: [fx.rel(x) for x in s]), first=("t_inv", "min"),
    ).reset_index().sort_values("first") if len(bad_rows) else pd.DataFrame(columns=["task"])

    def per_task_example(rows: pd.DataFrame) -> list[Example]:
        return [{"task": fx.name(r.task), "accepted_finishes": int(r.n), "gens": r.gens, "outcomes": r.outcomes,
                 "finished_by": r.processes, "finished_at": r.at} for r in rows.itertuples()]

    # One violation per accepted finish after a task's first: each beside the accepted finish before it.
    earlier = bad_rows.shift()
    later_mask = bad_rows["task"].duplicated()
    later = bad_rows.assign(e_gen=earlier["gen"], e_outcome=earlier["outcome"], e_process=earlier["process"],
                            e_t_comp=earlier["t_comp"])[later_mask]

    def describe(rows: pd.DataFrame) -> list[Example]:
        return [{"task": fx.name(r.task), "gen": num(r.gen), "outcome": r.outcome, "finish_by": num(r.process),
                 "finish_at": fx.rel(r.t_inv), "earlier_gen": num(r.e_gen), "earlier_outcome": r.e_outcome,
                 "earlier_by": num(r.e_process), "earlier_at": fx.rel(r.e_t_comp)} for r in rows.itertuples()]

    res = result_of("single_finish", per_task, per_task_example, found=later.sort_values("t_inv"))
    res.describe = describe
    res.violations = int((per_task["n"] - 1).sum()) if len(per_task) else 0
    # The violating operation is each task's second accepted finish (rows sorted by task, t_inv).
    res.first_at = fx.rel(later["t_inv"].min()) if len(later) else None
    return res


INVARIANTS: dict[str, Callable[[Facts], InvariantResult]] = {
    "no_stale_commit": no_stale_commit,
    "finish_within_lease": finish_within_lease,
    "no_reclaim_after_terminal": no_reclaim_after_terminal,
    "generation_monotonic": generation_monotonic,
    "lease_exclusive": lease_exclusive,
    "single_finish": single_finish,
    "state_matches_history": state_matches_history,
    "no_lost_task": no_lost_task,
}


def check_invariants(fx: Facts) -> dict[str, InvariantResult]:
    results = {name: fn(fx) for name, fn in INVARIANTS.items()}
    # The claims sorted by generation served generation_monotonic and lease_exclusive, and nothing after
    # them: not held through the rest of the check (9 MB of the 1M-event check's peak, which is later).
    vars(fx).pop("_claims_by_gen", None)
    return results
