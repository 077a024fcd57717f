"""The check ``answers_well_formed``: every answer the queue gave had the contract's form, and every lease
end was the one asked for.

Why beside the eight invariants and not one of them: the invariants judge what the queue *did*, from
what it answered; this judges whether those answers can be judged at all. A run whose queue answered a
claim with a 5 MB string, a finish with None, a lease end of NaN (``null`` in the history) or
``now + 1000 * lease`` would otherwise be judged on garbage: a NaN lease end made the lease checks pass
(issue 34). So a run with such answers is INVALID under this name, with a sentence quoting the first
answer, and its other findings are told as built on those answers (:func:`qualify`). A run without any
keeps its summary as it was: the check is listed only when it is violated.

What it reads from the history (docs/history.md):

* the ``answer`` records the worker (and the registration) writes when an answer was malformed or a call
  escaped with ``sys.exit()`` or another ``BaseException`` (takeover._internal.answers);
* every successful claim: its ``lease_until`` must be there (a history written before answers were
  checked holds ``null`` for NaN and the infinities) and be ``now + lease``, the run's ``--lease``, which
  every claim asks for (up to what the call took later: a library's own clock read during it; earlier is a
  warning, :data:`SHORT`);
* every successful extend: its ``lease_until`` must be there and be ``max(old, now + lease)``, ``old`` the
  task's lease before it (its claim's, or a later one an earlier extend returned).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from takeover._internal.answers import ANSWER_RECORD, CHECK, LEASE_TOLERANCE, lease_departure
from takeover._internal.checker.diagnosis import Diagnosis
from takeover._internal.checker.facts import Facts
from takeover._internal.checker.invariant_result import InvariantResult, num
from takeover.summary_types import DiagnosisJson, Example

MALFORMED = "malformed_answer"
DEPARTED = "lease_departure"
PATTERNS = {
    MALFORMED: ("the queue answers what the contract does not allow (a wrong type or shape, NaN or an infinity, "
                "or a call that escaped with sys.exit() or a BaseException); nothing built on those answers is "
                "a reliable finding"),
    DEPARTED: ("the queue answers a lease end longer than the one asked for (now + lease; an extend: max(old, "
               "now + lease); more than the call took past it): the lease checks judge by the answered end, so "
               "it would hide a late finish"),
}
# A lease end *shorter* than asked is named in a warning, not made INVALID: libraries that stamp the lease
# from their own clock, after the ``now`` they were given, answer a few milliseconds short (RQ,
# docs/analyses/rq.md), and the lease checks judge such an end more strictly for finish_within_lease.
SHORT = "lease_short"


def answers_well_formed(fx: Facts) -> tuple[InvariantResult | None, str | None]:
    """The check's result, or None when every answer was well formed (the summary then leaves it out); and
    the warning naming lease ends shorter than asked, or None."""
    parts = [f for f in (_answer_records(fx), _claim_leases(fx), _extend_leases(fx)) if len(f)]
    if not parts:
        return None, None
    every = pd.concat(parts, ignore_index=True).sort_values("t", kind="stable").reset_index(drop=True)
    short = every[every["pattern"] == SHORT]
    warning = None
    if len(short):
        warning = (f"{len(short)} lease end(s) shorter than asked, by up to {float(short['by_s'].max()) * 1000:.1f} ms "
                   f"(e.g. {short['what'].iloc[0]}): the lease checks judge by the answered end; a lease the queue "
                   "really held longer could hide a lease_exclusive violation that short")
    found = every[every["pattern"] != SHORT].reset_index(drop=True)
    if not len(found):
        return None, warning

    def describe(rows: pd.DataFrame) -> list[Example]:
        return [{"pattern": r.pattern, "method": r.method, "task": fx.name(r.task), "gen": num(r.gen),
                 "by": num(r.process), "at": fx.rel(r.t), "answer": r.what} for r in rows.itertuples()]

    tasks = np.unique(found["task"].dropna().to_numpy(dtype="float64")).tolist()
    first = str(found["what"].iloc[0])
    kinds = found["pattern"].value_counts()
    note = f"{first}" + (f" ({len(found)} such answers: " + ", ".join(f"{k} {v}" for k, v in kinds.items()) + ")"
                         if len(found) > 1 else "")
    return InvariantResult(CHECK, False, int(len(found)), describe(found.head(5)), tasks, note,
                           fx.rel(float(found["t"].iloc[0])), found, describe), warning


def _frame(t: object, process: object, method: str | object, task: object, gen: object, what: object,
           pattern: str | object, by_s: object = 0.0) -> pd.DataFrame:
    return pd.DataFrame({"t": np.asarray(t, dtype="float64"), "process": np.asarray(process, dtype="float64"),
                         "method": method, "task": np.asarray(task, dtype="float64"),
                         "gen": np.asarray(gen, dtype="float64"), "what": what, "pattern": pattern, "by_s": by_s})


def _took(calls: pd.DataFrame) -> np.ndarray:
    """How long each call took (its completion's record time minus its invoke's): a library that stamps the
    lease from its own clock while the call runs (pg-boss's started_on, on the database server) answers an
    end up to that much past ``now + lease``, which is no departure."""
    took = calls["t_comp"].to_numpy(dtype="float64") - calls["t_inv"].to_numpy(dtype="float64")
    return np.nan_to_num(np.maximum(took, 0.0), nan=0.0)


def _answer_records(fx: Facts) -> pd.DataFrame:
    h = fx.run.history
    if not len(h):
        return _frame([], [], [], [], [], [], MALFORMED)
    rows = h[(h["f"] == ANSWER_RECORD).to_numpy(dtype=bool)]
    what = rows["detail"].astype(object).fillna("a malformed answer").to_numpy()
    method = rows["value"].astype(object).fillna("?").to_numpy()
    return _frame(rows["time"], rows["process"], method, rows["task"], rows["gen"], what, MALFORMED)


def _claim_leases(fx: Facts) -> pd.DataFrame:
    c = fx.claims_ok
    until = c["lease_until"].to_numpy(dtype="float64")
    now = c["now"].to_numpy(dtype="float64")
    missing = np.isnan(until)
    frames = [_frame(c["t_comp"][missing], c["process"][missing], "claim", c["task"][missing], c["gen"][missing],
                     "claim returned no lease_until (null in the history: a NaN or an infinity, written before "
                     "takeover checked answers)", MALFORMED)]
    if fx.lease is not None:
        lease = float(fx.lease)
        gap = until - (now + lease)
        took = _took(c)
        off = ~missing & ~np.isnan(now) & ((gap > took + LEASE_TOLERANCE) | (gap < -LEASE_TOLERANCE))
        what = [lease_departure("claim", float(u), float(n), lease) for u, n in zip(until[off], now[off], strict=True)]
        frames.append(_frame(c["t_comp"][off], c["process"][off], "claim", c["task"][off], c["gen"][off], what,
                             np.where(gap[off] > 0, DEPARTED, SHORT), np.abs(gap[off])))
    return pd.concat(frames, ignore_index=True)


def _extend_leases(fx: Facts) -> pd.DataFrame:
    e = fx.ops.extends
    ok = e[e["status"] == "ok"]
    if not len(ok):
        return _frame([], [], [], [], [], [], MALFORMED)
    until = ok["lease_until_c"].to_numpy(dtype="float64")
    missing = np.isnan(until)
    frames = [_frame(ok["t_comp"][missing], ok["process"][missing], "extend", ok["task"][missing],
                     ok["gen"][missing], "extend returned no lease_until (null in the history: a NaN or an "
                     "infinity, written before takeover checked answers)", MALFORMED)]
    if fx.lease is not None:
        lease = float(fx.lease)
        x = ok[~missing].sort_values("t_inv", kind="stable")
        # The lease before each extend: its claim's, or the longest an earlier extend of it returned.
        earlier = x.groupby(["task", "gen"], sort=False)["lease_until_c"].cummax()
        earlier = earlier.groupby([x["task"], x["gen"]], sort=False).shift()
        claimed = x.merge(fx.claim_lease().rename("claimed"), left_on=["task", "gen"], right_index=True,
                          how="left")["claimed"]
        old = np.fmax(earlier.to_numpy(dtype="float64"), claimed.to_numpy(dtype="float64"))
        got = x["lease_until_c"].to_numpy(dtype="float64")
        now = x["now"].to_numpy(dtype="float64")
        want = np.fmax(old, now + lease)
        gap = got - want
        took = _took(x)
        off = ~np.isnan(now) & ((gap > took + LEASE_TOLERANCE) | (gap < -LEASE_TOLERANCE))
        what = [lease_departure("extend", float(g), float(n), lease, None if np.isnan(o) else float(o))
                for g, n, o in zip(got[off], now[off], old[off], strict=True)]
        frames.append(_frame(x["t_comp"][off], x["process"][off], "extend", x["task"][off], x["gen"][off], what,
                             np.where(gap[off] > 0, DEPARTED, SHORT), np.abs(gap[off])))
    return pd.concat(frames, ignore_index=True)


def diagnosis(result: InvariantResult) -> list[DiagnosisJson]:
    """The check's own entries of the diagnosis: one per kind of departure, the first sentence quoted."""
    found = result.found
    if found is None:
        return []
    out: list[DiagnosisJson] = []
    examples = result.every_violation()
    for pattern in (MALFORMED, DEPARTED):
        at = np.flatnonzero((found["pattern"] == pattern).to_numpy())
        if not len(at):
            continue
        tasks = [t for t in dict.fromkeys(examples[j].get("task") for j in at) if t is not None]
        out.append({"invariant": CHECK, "pattern": pattern, "scenario": "contract", "defect": PATTERNS[pattern],
                    "sentence": f"{examples[at[0]]['answer']}: {PATTERNS[pattern]}", "count": len(at),
                    "task_count": len(tasks), "tasks": tasks[:10], "replay_task": None})
    return out


QUALIFIED = "built on malformed answers (see answers_well_formed), not a reliable finding: "


def qualify(diag: Diagnosis, result: InvariantResult) -> Diagnosis:
    """The diagnosis with this check's entries and rows first; after a malformed answer every other entry
    says it is built on those answers, and names no task to replay."""
    mine = diagnosis(result)
    entries = diag.entries
    if any(e["pattern"] == MALFORMED for e in mine):
        entries = [{**e, "sentence": QUALIFIED + e["sentence"], "replay_task": None} for e in entries]
    rows: list[Example] = [{"invariant": CHECK, "pattern": f["pattern"], "task": f["task"], "at": f["at"],
                            "generations": "" if f["gen"] is None else str(f["gen"]),
                            "processes": "" if f["by"] is None else str(f["by"]), "cause": None,
                            "method": f["method"], "answer": f["answer"]} for f in result.every_violation()]
    return Diagnosis(rows + diag.rows, mine + entries)
