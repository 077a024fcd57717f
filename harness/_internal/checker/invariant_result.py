"""What one invariant concluded (:class:`InvariantResult`), and the few helpers the invariants share: how a
result is built, and how many missing generations indeterminate claims can explain (:func:`unexplained`).

Why a module of its own: the invariants are judged in two modules (:mod:`takeover._internal.checker.invariants`, the
rules over operations; :mod:`takeover._internal.checker.end_state`, the final and probed states against the
history), and the diagnosis, the verdict and the reports read their results; all of them share this
vocabulary and none of the rules.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from takeover._internal.checker.facts import Facts
from takeover.summary_types import Example, InvariantJson, Verdict

TERMINAL = ("done", "uncertain")
EXAMPLES = 5


# How a run of violating rows reads: one example (summary.json's fields) per row, in order.
Describe = Callable[[pd.DataFrame], list[Example]]


@dataclass
class InvariantResult:
    name: str
    valid: Verdict
    violations: int
    examples: list[Example]
    tasks: list[float] = field(default_factory=list)  # the codes of every task involved, for the report's figures
    note: str = ""
    # Seconds from the run's first record to the earliest violating operation (its invoke), or None
    # when valid or when the violation is seen only in the final snapshot. Kept off ``to_json``:
    # summary.json's examples already carry times, and the detection bench
    # (takeover.benchmarks.detection) needs the earliest one, which the first EXAMPLES may not hold.
    first_at: float | None = None
    # Every violation, one row each (``violations`` rows), in the invariant's own columns, and how
    # a row reads (the examples' fields). Kept as a frame: only a run with violations pays for
    # turning them into dicts (violations.csv, the diagnosis, the report's task sections).
    found: pd.DataFrame | None = None
    describe: Describe | None = None

    def to_json(self) -> InvariantJson:
        out: InvariantJson = {"valid": self.valid, "violations": self.violations, "examples": self.examples}
        if self.note:
            out["note"] = self.note
        return out

    def every_violation(self) -> list[Example]:
        """Each violation's fields, as an example shows them, in the order of ``found``."""
        if self.found is None or self.describe is None or not len(self.found):
            return []
        return self.describe(self.found)


def result_of(name: str, bad: pd.DataFrame, describe: Describe, note: str = "",
            fx: Facts | None = None, at: str = "", found: pd.DataFrame | None = None) -> InvariantResult:
    """``at``: the column of ``bad`` holding each violating operation's time (record clock).
    ``found``: the violations one row each, when a row of ``bad`` is not one violation."""
    tasks = np.unique(bad["task"].dropna().to_numpy(dtype="float64")).tolist() if len(bad) else []
    first = fx.rel(bad[at].min()) if fx is not None and at and len(bad) else None
    examples = describe(bad.head(EXAMPLES)) if len(bad) else []
    return InvariantResult(name, len(bad) == 0, int(len(bad)), examples, tasks, note, first,
                           bad if found is None else found, describe)


def suffixed(frame: pd.DataFrame, suffix: str, keys: tuple[str, ...] = ("task",)) -> pd.DataFrame:
    """Suffix every column but the join keys, so joined names are predictable."""
    return frame.rename(columns={c: c + suffix for c in frame.columns if c not in keys})


def num(x: Any) -> int | None:
    """A process number or generation for an example: int, or None when missing."""
    return None if pd.isna(x) else int(x)


# -- generations no claim surely took, explained by indeterminate claims (generation_monotonic, the end state) --
def unexplained(deadlines: np.ndarray, missing: np.ndarray, ind_times: np.ndarray) -> np.ndarray:
    """Per gap, how many generations remain unexplained by indeterminate claims (Hall's condition).

    Each missing generation needs its own indeterminate claim invoked before the gap's deadline;
    the candidate sets are nested prefixes of the claims sorted by invoke time, so a matching
    exists iff, for every deadline, the generations due by then do not outnumber the claims
    invoked before it. Returns the deficit at each gap (input order), 0 where explained.
    """
    if len(deadlines) == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.argsort(deadlines, kind="stable")
    due = np.cumsum(missing[order])
    avail = np.searchsorted(ind_times, deadlines[order], side="left")
    deficit = np.maximum(due - avail, 0)
    out = np.zeros(len(deadlines), dtype=np.int64)
    out[order] = deficit
    return out


def unexplained_each(deadlines: np.ndarray, missing: np.ndarray, ind_times: np.ndarray) -> np.ndarray:
    """Per gap, the generations it leaves unexplained when indeterminate claims are matched to the
    gaps earliest deadline first. Every claim that may explain a gap may also explain any gap due
    later, so this matching explains as many generations as any can: the counts sum to the largest
    deficit of :func:`unexplained`, and each unexplained generation is one violation of one gap
    (what violations.csv lists), not of every gap after it."""
    order = np.argsort(deadlines, kind="stable")
    avail = np.searchsorted(ind_times, deadlines[order], side="left")
    out = np.zeros(len(deadlines), dtype=np.int64)
    used = 0
    for k, free in zip(order.tolist(), avail.tolist(), strict=True):
        need = int(missing[k])
        take = min(need, free - used)
        used += take
        out[k] = need - take
    return out
