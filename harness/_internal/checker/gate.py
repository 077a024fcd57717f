"""The duplicate gate: which duplicate side effects fail a run (``--fail-on-duplicates``,
``--max-duplicates-per-1000``).

Why not every duplicate: a lease cannot prevent all of them (the spec's S5). A worker killed after its
action and before its finish, or a holder that outlived its lease and acted anyway, repeats a side effect
on any correct queue; with ``--remedy none`` a run of the reference queue has some. Failing CI on those
fails every queue, so nobody could tell what to gate on. ``--fail-on-duplicates`` therefore fails only the
duplicates that something in the run *promised* to prevent:

- the lease, whatever the remedy: two holders acting on one lease at once, one generation acting twice,
  or a task handed out again after its finish took effect (cause ``other``: a queue bug, which an
  invariant names too);
- ``--remedy fencing``, besides: an action performed with a generation lower than one the service had
  already seen for the task (the fence refuses exactly those);
- ``--remedy idempotency-key``: every duplicate (the service performs a key's action once).

What no remedy of the run promised (S5 under ``none`` or ``fencing``, a lost lease acting before the new
holder did under ``fencing``) is a rate to keep low rather than a bug: ``--max-duplicates-per-1000 N``
fails the run when all extra actions per 1000 tasks exceed N.

The gate's section of summary.json (``duplicate_gate``) is written only when a gate was asked for, so a
run checked without one keeps its summary.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from takeover._internal.checker.duplicate_causes import causes
from takeover._internal.checker.facts import Facts
from takeover.summary_types import DuplicateGate

# What each remedy promises beyond the lease, in the words the report and the docs use
# (docs/explanation/duplicates.md).
PROMISES = {
    "none": "no remedy at the service: only the lease's promise (one holder at a time)",
    "fencing": "the lease's promise, and no action with a generation lower than one already seen",
    "idempotency-key": "no duplicate at all: the service performs a key's action once",
}


@dataclass(frozen=True)
class Gate:
    """What fails a run besides its invariants. The default fails nothing."""

    fail_on_duplicates: bool = False
    max_per_1000: float | None = None  # extra actions per 1000 tasks; None: no cap

    @property
    def requested(self) -> bool:
        return self.fail_on_duplicates or self.max_per_1000 is not None


def _fenced(fx: Facts, extra: pd.DataFrame) -> pd.Series:
    """Per extra action: was its generation lower than the highest of any earlier request on its task
    (performed or not)? The fence refuses exactly those requests."""
    ledger = fx.run.ledger
    assert ledger is not None
    rows = ledger[["task", "seq", "gen"]].sort_values(["task", "seq"], kind="stable")
    seen = rows.groupby("task", sort=False)["gen"].cummax()
    before = seen.groupby(rows["task"], sort=False).shift()  # the highest generation before each request
    highest = pd.Series(before.to_numpy(), index=rows["seq"].to_numpy())
    return pd.Series(extra["gen"].to_numpy() < highest.reindex(extra["seq"].to_numpy()).to_numpy(),
                     index=extra.index)


def judge(fx: Facts, extra: pd.DataFrame | None, tasks: int, gate: Gate) -> DuplicateGate:
    """The gate's verdict on one run: the duplicates its remedy promised to prevent, the rate, and
    whether either fails the run (with the reasons, in words)."""
    remedy = str(fx.config.get("remedy") or "none")
    out: DuplicateGate = {"remedy": remedy, "promise": PROMISES.get(remedy, ""),
                          "fail_on_duplicates": gate.fail_on_duplicates, "max_per_1000": gate.max_per_1000,
                          "promised": None, "promised_by_cause": {}, "per_1000": None, "failed": False,
                          "reasons": []}
    if extra is None:
        out["note"] = "no ledger: duplicates cannot be counted, so the gate cannot fail the run"
        return out
    if remedy == "idempotency-key":
        promised = pd.Series(True, index=extra.index)
    else:
        promised = extra["cause"].eq("other")
        if remedy == "fencing" and len(extra):
            promised |= _fenced(fx, extra)
    by_cause = extra.loc[promised, "cause"].value_counts()
    out["promised"] = int(promised.sum())
    out["promised_by_cause"] = {c: int(by_cause.get(c, 0)) for c in causes(fx)}
    per_1000 = out["per_1000"] = round(1000.0 * len(extra) / tasks, 2) if tasks else 0.0
    if gate.fail_on_duplicates and out["promised"]:
        out["reasons"].append(f"{out['promised']} duplicate side effect(s) that remedy {remedy} and the lease "
                              f"promise to prevent (--fail-on-duplicates)")
    if gate.max_per_1000 is not None and per_1000 > gate.max_per_1000:
        out["reasons"].append(f"{per_1000:g} duplicate side effects per 1000 tasks, above "
                              f"--max-duplicates-per-1000 {gate.max_per_1000:g}")
    out["failed"] = bool(out["reasons"])
    return out
