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

from takeover._internal.checker.load import RunData
from takeover._internal.checker.ops import CLOCK_FAULTS, Ops, frame_of, pair_operations


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

    names: pd.Index  # task code -> task id; every "task" column in the frames holds codes
    # Stopped by Ctrl-C / SIGTERM ("run" record ``interrupted`` instead of ``drain_end``): faults
    # and workers were stopped and a snapshot taken, but nothing drained, so an unfinished task
    # proves nothing about the queue.
    interrupted: bool = False
    # Clock faults (takeover._internal.checker.facts.clock_offsets): each history row's clock offset, the seconds its
    # process's clock was ahead of the real clock at that record (``now`` minus the real time of the call);
    # None when the run recorded no clock fault, so runs without them pay nothing.
    clock_offset: np.ndarray | None = None
    # The clock faults themselves, one row per invoke: time, process, f, worker, step (seconds, a float).
    clocks: pd.DataFrame | None = None

    def offset(self, rows: Any) -> np.ndarray:
        """The clock offset at history rows ``rows`` (an operation's ``i``): zeros without clock faults."""
        idx = np.asarray(rows, dtype="float64")
        if self.clock_offset is None:
            return np.zeros(len(idx))
        out = np.full(len(idx), np.nan)
        ok = ~np.isnan(idx)
        out[ok] = self.clock_offset[idx[ok].astype(np.int64)]
        return out

    def name(self, code: Any) -> str | None:
        """The task id behind a code (frames carry integer codes so joins stay cheap)."""
        if code is None or pd.isna(code) or int(code) < 0:
            return None
        return str(self.names[int(code)])

    def code(self, name: str) -> float:
        got = self.names.get_indexer([name])[0]
        return float(got) if got >= 0 else -1.0

    def claim_lease(self) -> pd.Series:
        """The lease each (task, gen) got from its claims (the latest, if claimed twice), indexed
        by (task, gen). Four checks need it: grouping 100k+ claims once instead of four times."""
        cached = getattr(self, "_claim_lease", None)
        if cached is None:
            cached = self.claims_ok.groupby(["task", "gen"], sort=False)["lease_until"].max()
            self._claim_lease = cached
        return cached

    def rel(self, t: float) -> float | None:
        """Seconds since the run's first record: what examples and reports show."""
        if t is None or (isinstance(t, float) and np.isnan(t)):
            return None
        return round(float(t) - self.t0, 3)


def power_loss_times(fx: Facts) -> np.ndarray:
    """When each power loss of the run began (its invoke), sorted; empty without power losses."""
    faults = fx.ops.faults
    return np.sort(faults.loc[faults["f"] == "power_loss", "t_inv"].to_numpy(dtype="float64"))


def volatile_restart_times(fx: Facts) -> np.ndarray:
    """When each restart of a Redis server that kept nothing on disk began (``--redis-persistence none``),
    sorted; empty for any other run: such a restart empties the queue, whatever the queue does."""
    if fx.config.get("redis_persistence") != "none":
        return np.zeros(0)
    faults = fx.ops.faults
    return np.sort(faults.loc[faults["f"] == "db_restart", "t_inv"].to_numpy(dtype="float64"))


def volatile_restart_between(fx: Facts, lo: Any, hi: Any) -> tuple[np.ndarray, np.ndarray]:
    """As :func:`power_loss_between`, for the restarts of :func:`volatile_restart_times`."""
    return _first_between(volatile_restart_times(fx), lo, hi)


def power_loss_between(fx: Facts, lo: Any, hi: Any) -> tuple[np.ndarray, np.ndarray]:
    """Per row: whether a power loss began after ``lo`` (an acknowledged answer) and before ``hi``
    (what goes back on it), and when the first power loss after ``lo`` began (NaN: none). A NaN ``lo``
    never has one after it; a NaN ``hi`` stands for the end of the run. Every reader that excuses or
    blames a power loss uses this rule: the diagnosis, the probes and the duplicates' causes."""
    return _first_between(power_loss_times(fx), lo, hi)


def _first_between(losses: np.ndarray, lo: Any, hi: Any) -> tuple[np.ndarray, np.ndarray]:
    lo = np.asarray(lo, dtype="float64")
    hi = np.asarray(hi, dtype="float64")
    if not len(losses) or not len(lo):
        return np.zeros(len(lo), dtype=bool), np.full(len(lo), np.nan)
    pos = np.searchsorted(losses, np.nan_to_num(lo, nan=np.inf), side="right")
    at = np.where(pos < len(losses), losses[np.minimum(pos, len(losses) - 1)], np.nan)
    return at < np.nan_to_num(hi, nan=np.inf), at


def _encode_tasks(run: RunData) -> pd.Index:
    """Replace task ids by float codes (NaN = none) in the history, snapshot, ledger and probes, in place.

    The history's categories become the first codes (its category codes are then the task codes,
    no lookup per row); ids only the snapshot or ledger know are appended after them."""
    h = run.history
    col = h["task"] if isinstance(h["task"].dtype, pd.CategoricalDtype) else h["task"].astype("category")
    names = pd.Index(np.asarray(col.cat.categories, dtype=object), dtype=object)
    others = [f for f in (run.snapshot, run.ledger, run.probes) if f is not None]
    values = [f["task"].to_numpy(dtype=object) for f in others]
    # One lookup over both (the snapshot and the ledger name the same ~100k ids): the hash table
    # of ``names`` is built once, not once per frame; as an object Index, since pandas would
    # otherwise first convert 250k ids to its arrow string dtype.
    joined = names.get_indexer(pd.Index(np.concatenate(values), dtype=object)) if values else np.zeros(0, dtype=np.intp)
    codes = np.split(joined, np.cumsum([len(v) for v in values])[:-1]) if values else []
    unknown = [v[c < 0] for v, c in zip(values, codes, strict=True)]
    if any(len(u) for u in unknown):
        names = names.append(pd.Index(pd.unique(np.concatenate(unknown)), dtype=object))
        codes = [names.get_indexer(v) if len(u) else c for v, c, u in zip(values, codes, unknown, strict=True)]
    task_codes = col.cat.codes.to_numpy().astype("float64")
    task_codes[task_codes < 0] = np.nan
    h["task"] = task_codes
    for frame, c in zip(others, codes, strict=True):
        frame["task"] = c.astype("float64")
    return _held_compactly(names)


def _held_compactly(names: pd.Index) -> pd.Index:
    """``names`` (task ids) as one Arrow string array, or as they are when they are not all text.

    Why: as 124k Python strings (57 bytes each, and a pointer) with the hash table of the lookup above,
    the check_1m history's ids were 10 MB held through the whole check for the few ids the examples and
    reports name; in Arrow's buffers they are 1.9 MB. A lookup of a name (:meth:`Facts.code`) builds the
    hash table again, once, when a section asks for one."""
    import pyarrow as pa

    try:
        ids = pa.array(names.to_numpy(dtype=object), type=pa.string())
    except (pa.ArrowException, TypeError, ValueError):  # a lone surrogate from a foreign snapshot, say
        return names
    if ids.null_count:  # a missing id a snapshot or a ledger named: kept as None, as before
        return names
    return pd.Index(pd.arrays.ArrowStringArray(pa.chunked_array([ids])), copy=False)


def clock_offsets(h: pd.DataFrame) -> tuple[np.ndarray | None, pd.DataFrame | None]:
    """Each history row's clock offset, and the clock-fault records; (None, None) without any.

    A worker incarnation's offset is its ``clock_skew`` plus every ``clock_jump`` it recorded before
    the row: the worker writes both itself, between its calls, so in its own records' file order each
    call comes after every step that moved the ``now`` it passed. The coordinator, the service and a
    process without clock records are at 0.
    """
    if not len(h):
        return None, None
    is_clock = (h["f"].isin(CLOCK_FAULTS) & (h["type"] == "invoke")).to_numpy(dtype=bool)
    if not is_clock.any():
        return None, None
    rows = h.loc[is_clock, ["time", "process", "f", "worker", "value"]]
    step = pd.to_numeric(rows["value"].astype(object), errors="coerce").fillna(0.0).to_numpy(dtype="float64")
    steps = np.zeros(len(h))
    steps[is_clock] = step
    offsets = pd.Series(steps).groupby(h["process"].to_numpy()).cumsum().to_numpy(dtype="float64")
    clocks = pd.DataFrame({"time": rows["time"].to_numpy(dtype="float64"),
                           "process": rows["process"].to_numpy(dtype="float64"),
                           "f": rows["f"].astype(object).to_numpy(), "worker": rows["worker"].astype(object).to_numpy(),
                           "step": step})
    return offsets, clocks


_COPY_ON_WRITE = int(pd.__version__.split(".")[0]) >= 3  # always on from pandas 3 (pandas 2.1+ is declared)


def _rows(frame: pd.DataFrame, mask: Any) -> pd.DataFrame:
    """The rows of ``frame`` (an operation frame) where ``mask`` holds, numbered from 0. When every row does
    (all of a valid run's claims succeed) a shallow copy: copy-on-write keeps the two apart, and the 1M-event
    check does not hold two copies of its largest frames. Otherwise column by column, a column of one value
    again held once (:func:`takeover._internal.checker.ops.frame_of`): of the accepted finishes, which are
    nearly all of them, 10 of 22 columns (18 MB on the check_1m history, 8 MB with this)."""
    keep = np.asarray(mask, dtype=bool)
    numbered = isinstance(frame.index, pd.RangeIndex) and frame.index.start == 0 and frame.index.step == 1
    if _COPY_ON_WRITE and numbered and keep.all():
        return frame.copy(deep=False)
    if not all(isinstance(t, np.dtype) for t in frame.dtypes):
        return frame[keep].reset_index(drop=True)
    return frame_of({name: frame[name].to_numpy()[keep] for name in frame.columns})


def build_facts(run: RunData) -> Facts:
    names = _encode_tasks(run)
    ops = pair_operations(run.history)
    c = ops.claims
    claims_ok = _rows(c, (c["status"] == "ok") & c["task"].notna() & c["gen"].notna())
    claims_ind = _rows(c, c["indeterminate"])
    fin = ops.finishes
    fin_ok_task = fin["task"].notna() & fin["gen"].notna()
    fin_acc = _rows(fin, fin["accepted"] & fin_ok_task)
    fin_ind = _rows(fin, fin["indeterminate"] & fin_ok_task)
    fin_rej = _rows(fin, fin["rejected"] & fin_ok_task)
    e = ops.extends
    ext_ok = _rows(e, (e["status"] == "ok") & e["lease_until_c"].notna())
    ext_ind = _rows(e, e["indeterminate"])
    ind_times = np.sort(claims_ind["t_inv"].to_numpy(dtype="float64"))
    lease = run.config.get("lease")
    marks = ops.run_events["value"].astype(object).to_numpy()
    offsets, clocks = clock_offsets(run.history)
    return Facts(run, ops, claims_ok, claims_ind, fin_acc, fin_ind, fin_rej, ext_ok, ext_ind, ind_times,
                 run.config, ops.t0, ops.t1, float(lease) if isinstance(lease, int | float) else None, names,
                 interrupted=bool((marks == "interrupted").any()), clock_offset=offsets, clocks=clocks)
