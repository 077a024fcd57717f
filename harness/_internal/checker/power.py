"""What the power losses of a run cost: which promises they broke, and how much per power loss.

Why a section of its own: a power loss breaks promises that several invariants share (a finish undone
shows as a reclaim, a second accepted finish and a duplicate side effect; a claim undone as a
generation handed out twice). The diagnosis (:mod:`takeover._internal.checker.diagnosis`) sorts every violation
whose acknowledged answer a power loss came between into the ``power_loss`` pattern; this module counts
those per promise, in plain words, and per power loss (the finding in docs/howto/power-loss.md compares
``synchronous=NORMAL`` with ``FULL`` by these numbers). Duplicates are counted from the ledger: the
extra actions on tasks whose violations a power loss explains.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from takeover._internal.checker.duplicate_causes import has_power_losses
from takeover._internal.checker.facts import Facts
from takeover.summary_types import Example, PowerLoss

# The promise each invariant's power-loss violations broke, in the words the reports use.
PROMISES = {
    "no_reclaim_after_terminal": "a finish answered True was undone and the task was handed out again",
    "single_finish": "a task was finished twice (its first, acknowledged finish was undone)",
    "generation_monotonic": "a generation was handed out twice (a claim was undone), so two holders "
                            "carried the same fence token",
    "lease_exclusive": "a lease was granted while an acknowledged one was still valid",
    "state_matches_history": "the final state goes back on what the queue had answered",
    "no_lost_task": "a task the queue had answered for was lost or left unfinished",
}


def power_loss(fx: Facts, violations: list[Example], extra: pd.DataFrame | None) -> PowerLoss | None:
    """The ``power_loss`` section of summary.json; None for a run without power losses (its summary
    keeps the keys it always had)."""
    faults = fx.ops.faults
    rows = faults[faults["f"] == "power_loss"]
    rate = fx.config.get("power_loss_rate")
    if not has_power_losses(fx):
        return None
    losses = int(len(rows))
    found = [v for v in violations if v.get("pattern") == "power_loss"]
    per_invariant = Counter(str(v["invariant"]) for v in found)
    tasks = {v.get("task") for v in found}
    duplicates = 0
    if extra is not None and len(extra) and tasks:
        codes = np.array([fx.code(str(t)) for t in tasks if t is not None], dtype="float64")
        duplicates = int(extra["task"].isin(codes).sum())
    broken = [f"{PROMISES[name]} ({n})" for name, n in per_invariant.items() if name in PROMISES]
    reclaims, reused = per_invariant["no_reclaim_after_terminal"], per_invariant["generation_monotonic"]
    cost = {"reclaims": reclaims, "reused_generations": reused, "duplicates": duplicates}
    return {
        "rate": float(rate) if isinstance(rate, int | float) else 0.0,
        "losses": losses,
        "at": [fx.rel(t) for t in rows["t_inv"].to_numpy(dtype="float64")],
        "violations": len(found),
        "by_invariant": dict(per_invariant),
        "broken": broken,
        "reclaims": reclaims,
        "reused_generations": reused,
        "duplicates": duplicates,
        "per_loss": {k: round(v / losses, 2) if losses else None for k, v in cost.items()},
    }
