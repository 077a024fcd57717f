"""The derived frames every invariant and count starts from, computed once per run.

Why: each invariant is a few vectorized joins over the same handful of frames (successful claims,
indeterminate claims, accepted finishes, ...). Building them once keeps the invariants short and
the 1M-event check fast.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from harness.checker.load import RunData
from harness.checker.ops import Ops, pair_operations


@dataclass
class Facts:
    run: RunData
    ops: Ops
    claims_ok: pd.DataFrame  # successful claims: task, gen, lease_until, now, t_inv, t_comp, process, i
    claims_ind: pd.DataFrame  # claims that may or may not have taken effect
    fin_acc: pd.DataFrame  # finishes the queue accepted
    fin_ind: pd.DataFrame  # finishes that may or may not have taken effect
    fin_rej: pd.DataFrame  # finishes the queue refused
    ext_ok: pd.DataFrame
    ext_ind: pd.DataFrame
    ind_claim_times: np.ndarray  # sorted invoke times of indeterminate claims
    config: dict[str, Any]
    t0: float
    t1: float
    lease: float | None

    def rel(self, t: float) -> float | None:
        """Seconds since the run's first record: what examples and reports show."""
        if t is None or (isinstance(t, float) and np.isnan(t)):
            return None
        return round(float(t) - self.t0, 3)


def build_facts(run: RunData) -> Facts:
    ops = pair_operations(run.history)
    c = ops.claims
    claims_ok = c[(c["status"] == "ok") & c["task"].notna() & c["gen"].notna()].reset_index(drop=True)
    claims_ok["task"] = claims_ok["task"].astype(str)
    claims_ind = c[c["indeterminate"]].reset_index(drop=True)
    fin = ops.finishes
    fin_ok_task = fin["task"].notna() & fin["gen"].notna()
    fin_acc = fin[fin["accepted"] & fin_ok_task].reset_index(drop=True)
    fin_ind = fin[fin["indeterminate"] & fin_ok_task].reset_index(drop=True)
    fin_rej = fin[fin["rejected"] & fin_ok_task].reset_index(drop=True)
    for frame in (fin_acc, fin_ind, fin_rej):
        frame["task"] = frame["task"].astype(str)
    e = ops.extends
    ext_ok = e[(e["status"] == "ok") & e["lease_until_c"].notna()].reset_index(drop=True)
    ext_ind = e[e["indeterminate"]].reset_index(drop=True)
    ind_times = np.sort(claims_ind["t_inv"].to_numpy(dtype="float64"))
    lease = run.config.get("lease")
    return Facts(run, ops, claims_ok, claims_ind, fin_acc, fin_ind, fin_rej, ext_ok, ext_ind, ind_times,
                 run.config, ops.t0, ops.t1, float(lease) if isinstance(lease, int | float) else None)
