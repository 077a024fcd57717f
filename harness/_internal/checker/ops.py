"""From records to operations: pair each ``invoke`` with its completion, without a loop per event.

Why pairing by key: a worker incarnation performs one queue call at a time, so its invoke and
the next completion of the same ``f`` belong together. Faults are written by the nemesis (process
0) about several targets at once, and the coordinator may register tasks in batches, so those are
paired per target and per task. The aimed faults name no target (a script may freeze two workers,
or none): the nemesis runs at most one script of each kind at a time, so within its ``f`` each
invoke's completion is simply the next one, whatever other kinds are under way meanwhile. (Added
later) ``stale_return`` runs one script of each of its two orders at a time, and writes the order on
both records: a kind whose invokes carry ``order`` is paired within (``f``, ``order``). An
invoke with no completion is ``open``: its process died mid-call, which is exactly as
indeterminate as ``info``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

QUEUE_OPS = ("register", "claim", "action", "finish", "extend")
# The aimed faults (docs/history.md): process 0 writes ``invoke <kind>`` when one starts and ``ok <kind>``
# with ``value`` = ``hit`` or ``missed: <reason>`` when it ends. Named here, not taken from the runner's
# options: the checker imports no part of the runner.
AIMED_FAULTS = ("expire_and_return", "stale_return", "claim_stampede", "duplicate_register", "freeze_in_call",
                "stale_heartbeat", "lease_edge", "aim_unreached")
# ``power_loss`` (added later): process 0, no target, one at a time, so paired in order as the aimed ones.
# The network's faults (takeover._internal.run.net_faults), recorded only by runs with hosts.
NETWORK_FAULTS = ("partition", "conn_kill", "db_restart", "db_pause", "db_lost_reply")
FAULTS = ("kill", "pause", "slow", "lose_reply", *AIMED_FAULTS, "power_loss", *NETWORK_FAULTS)
INDETERMINATE = ("info", "open")
# Clock faults (docs/history.md): a worker incarnation records its clock's offset when it starts
# (``clock_skew``) and each step of it (``clock_jump``), ``value`` = seconds, invoke and ok together.
# Not paired with the faults above: each is an instant, and its invoke says it all (takeover._internal.checker.facts).
CLOCK_FAULTS = ("clock_skew", "clock_jump")

# Columns every operation frame carries (invoke side, then completion side).
_INVOKE_COLS = ("time", "process", "worker", "task", "gen", "now", "outcome", "value", "target", "phase")
_COMPLETE_COLS = ("time", "type", "task", "gen", "lease_until", "value", "outcome")


@dataclass
class Ops:
    """The run's operations, one frame per kind, plus the lifecycle and run-phase records."""

    claims: pd.DataFrame
    finishes: pd.DataFrame
    actions: pd.DataFrame
    extends: pd.DataFrame
    registers: pd.DataFrame
    faults: pd.DataFrame
    spawns: pd.DataFrame
    exits: pd.DataFrame
    run_events: pd.DataFrame
    unpaired_completions: int
    t0: float
    t1: float


def _np(col: pd.Series, dtype: str | None = None) -> np.ndarray:
    if dtype is None:
        return col.to_numpy()
    return col.to_numpy(dtype=dtype, na_value=np.nan if dtype == "float64" else None)


def _floats_at(col: pd.Series, rows: np.ndarray) -> np.ndarray:
    """``col`` at ``rows`` as float64 (missing as NaN), a fresh array. A numpy column is taken at the rows
    first and converted after: converting the whole 1M-row column first made two more 8 MB copies of each of
    the three columns pairing reads (the pairing's peak, about 80 MB of temporaries, was the check's)."""
    if isinstance(col.dtype, np.dtype) and col.dtype.kind in "fiu":
        return col.to_numpy()[rows].astype("float64", copy=False)
    return _np(col, "float64")[rows]


def pair_operations(h: pd.DataFrame) -> Ops:
    """Build the operation frames from the raw history (file order = real-time order)."""
    n = len(h)
    t_all = h["time"].to_numpy() if h["time"].dtype == np.float64 else _np(h["time"], "float64")
    t0 = float(np.nanmin(t_all)) if n else 0.0
    t1 = float(np.nanmax(t_all)) if n else 0.0
    f = h["f"].astype("category") if n else h["f"]
    f_codes = f.cat.codes.to_numpy() if n else np.zeros(0, dtype=np.int8)
    cats = list(f.cat.categories) if n else []
    wanted = [cats.index(x) for x in QUEUE_OPS + FAULTS if x in cats]
    sel = np.flatnonzero(np.isin(f_codes, wanted))
    sub_f = f_codes[sel]
    reg_code = cats.index("register") if "register" in cats else -2
    fault_codes = [cats.index(x) for x in FAULTS if x in cats]
    is_fault = np.isin(sub_f, fault_codes)
    # Pairing key beyond (process, f): the task for registers, the target for faults (none, -1, for
    # the aimed ones, which one script per kind at a time pairs in order).
    # Only the columns pairing needs are taken at ``sel``: a full row copy of 1M events would double the
    # memory the check needs. The task and the target only at the rows keyed by them (registers, faults):
    # taken at every row, then chosen between, they were 40 MB of 8 MB temporaries at the pairing's peak.
    key = np.zeros(len(sel), dtype=np.int64)
    is_reg = sub_f == reg_code
    key[is_reg] = np.nan_to_num(_floats_at(h["task"], sel[is_reg]), nan=-1, copy=False).astype(np.int64)
    key[is_fault] = np.nan_to_num(_floats_at(h["target"], sel[is_fault]), nan=-1, copy=False).astype(np.int64)
    if "order" in h and is_fault.any():
        key[is_fault] = _per_order(h, sel[is_fault], sub_f[is_fault], key[is_fault])
    process = _floats_at(h["process"], sel)
    order = np.lexsort((sel, key, sub_f, process))
    s_proc, s_f, s_key = process[order], sub_f[order], key[order]
    del process, key, is_reg
    types = h["type"]
    if isinstance(types.dtype, pd.CategoricalDtype):
        inv_code = types.cat.categories.get_indexer(["invoke"])[0]
        is_inv = types.cat.codes.to_numpy()[sel][order] == inv_code
    else:
        is_inv = types.to_numpy(dtype=object)[sel][order] == "invoke"
    same_next = np.zeros(len(order), dtype=bool)
    if len(order) > 1:
        same_next[:-1] = (s_proc[:-1] == s_proc[1:]) & (s_f[:-1] == s_f[1:]) & (s_key[:-1] == s_key[1:])
    paired = np.zeros(len(order), dtype=bool)
    paired[:-1] = is_inv[:-1] & same_next[:-1] & ~is_inv[1:]
    inv_pos = np.flatnonzero(is_inv)
    comp_pos = np.where(paired[inv_pos], inv_pos + 1, -1)
    completed_mask = np.zeros(len(order), dtype=bool)
    completed_mask[comp_pos[comp_pos >= 0]] = True
    lone = ~is_inv & ~completed_mask
    if lone.any() and reg_code >= 0:
        _pair_lone_registers(np.flatnonzero(lone & (s_f == reg_code)), sel[order], s_proc, s_key, inv_pos, comp_pos,
                             is_reg=s_f == reg_code)
        completed_mask[comp_pos[comp_pos >= 0]] = True
    unpaired = int((~is_inv & ~completed_mask).sum())
    inv_rows = sel[order[inv_pos]]
    comp_rows = np.where(comp_pos >= 0, sel[order[np.maximum(comp_pos, 0)]], -1)
    # File order (= real-time order) without sorting an assembled frame: sort the row numbers.
    by_time = np.argsort(inv_rows, kind="stable")
    inv_rows, comp_rows = inv_rows[by_time], comp_rows[by_time]
    inv_f = f_codes[inv_rows]
    del order, s_proc, s_f, s_key, is_inv, same_next, paired, inv_pos, comp_pos, completed_mask, by_time

    def part(*names: str, extra: tuple[str, ...] = (), comp_extra: tuple[str, ...] = ()) -> pd.DataFrame:
        """Each kind assembled straight from the history rows: no all-operations frame to split."""
        codes = [cats.index(x) for x in names if x in cats]
        mask = np.isin(inv_f, codes)
        frame = _assemble(h, inv_rows[mask], comp_rows[mask], extra, comp_extra)
        frame["f"] = frame_of({"f": np.asarray(cats, dtype=object)[inv_f[mask]]})["f"]
        return frame

    claims = part("claim")
    claims["task"] = claims["task_c"]
    claims["gen"] = claims["gen_c"]
    claims["lease_until"] = claims["lease_until_c"]
    finishes = part("finish")
    finishes["task"] = finishes["task"].fillna(finishes["task_c"])
    finishes["gen"] = finishes["gen"].fillna(finishes["gen_c"])
    finishes["outcome"] = finishes["outcome"].fillna(finishes["outcome_c"])
    # A reply saying false refuses the finish. Judged once per distinct reply (a handful), not
    # lower-cased 100k times: text is lower-cased, anything else (missing, a number) accepts.
    status = finishes["status"].to_numpy(dtype=object)
    is_ok = status == "ok"
    reply_codes, replies = pd.factorize(finishes["value_c"].to_numpy(dtype=object))
    refusing = np.array([isinstance(v, str) and v.lower() in ("false", "0", "null") for v in replies] + [False])
    accepted = is_ok & ~refusing[reply_codes]  # code -1 (missing) takes the trailing False
    finishes["accepted"] = accepted
    finishes["rejected"] = (status == "fail") | (is_ok & ~accepted)
    actions = part("action")
    actions["task"] = actions["task"].fillna(actions["task_c"])
    actions["gen"] = actions["gen"].fillna(actions["gen_c"])
    extends = part("extend")
    extends["task"] = extends["task"].fillna(extends["task_c"])
    extends["gen"] = extends["gen"].fillna(extends["gen_c"])
    registers = part("register")
    registers["task"] = registers["task"].fillna(registers["task_c"])
    # Only faults carry ``detail`` (a pause's class, or the aimed fault that froze the worker).
    # And an aimed fault's end record its ``state`` (duplicate_register's: the task's, as ``state_c``).
    faults = part(*FAULTS, extra=("detail", "host"), comp_extra=("state", "cell"))
    faults["task"] = faults["task"].fillna(faults["task_c"])
    faults["gen"] = faults["gen"].fillna(faults["gen_c"])

    lifecycle_cols = ["time", "process", "type", "f", "worker", "pid", "target", "value"]
    life = h.loc[f.isin(["spawn", "exit"]).to_numpy(dtype=bool), lifecycle_cols] if n else h[lifecycle_cols]
    spawns = life[life["f"] == "spawn"].reset_index(drop=True)
    exits = life[life["f"] == "exit"].reset_index(drop=True)
    run_events = h.loc[(f == "run").to_numpy(dtype=bool), ["time", "value"]] if n else h[["time", "value"]]
    return Ops(claims, finishes, actions, extends, registers, faults, spawns, exits,
               run_events.reset_index(drop=True), unpaired, t0, t1)


def _per_order(h: pd.DataFrame, rows: np.ndarray, f_codes: np.ndarray, key: np.ndarray) -> np.ndarray:
    """The pairing key of the fault records at ``rows``: their ``order`` (as a category code) for
    the kinds whose invokes carry one, ``key`` unchanged for the others.

    Why only those: two windows of such a kind, one per order, may be open at once, so within its
    ``f`` an ok closes the invoke of its own order. Runs from before wrote the order of a
    ``stale_return`` on its ok alone, one window at a time: keyed by order, those oks would miss
    their invokes, so such a kind keeps the one key it always had.
    """
    order = h["order"].iloc[rows]
    codes = (order.cat.codes if isinstance(order.dtype, pd.CategoricalDtype)
             else pd.Series(pd.Categorical(order.to_numpy(dtype=object)).codes)).to_numpy(dtype=np.int64)
    invoke = h["type"].iloc[rows].to_numpy(dtype=object) == "invoke"
    laned = np.isin(f_codes, np.unique(f_codes[invoke & (codes >= 0)]))
    return np.where(laned, codes, key)


def _pair_lone_registers(lone: np.ndarray, rows: np.ndarray, proc: np.ndarray, key: np.ndarray,
                         inv_pos: np.ndarray, comp_pos: np.ndarray, *, is_reg: np.ndarray) -> None:
    """Give each register completion left without an invoke the latest invoke still open before
    it, in the same process, of the same task (or of any task, when the completion names none);
    ``comp_pos`` is updated in place. Positions are in the sorted order, ``rows`` in file order.

    Why: the pairing above only joins an invoke to the record right after it in its (process,
    register, task) group. A known task registered again can break that: one batch naming a task
    twice writes two invokes before two completions, and an ``info`` may carry only its error
    (docs/history.md), not the task its invoke named. Left alone, one of those registrations
    would look killed mid-call and its completion would count as unpaired. Only completions that
    found no invoke are walked, and there are none in a run without such records.
    """
    open_inv = inv_pos[(comp_pos < 0) & is_reg[inv_pos]]
    waiting: dict[float, list[int]] = {}
    for q in open_inv[np.argsort(rows[open_inv], kind="stable")]:
        waiting.setdefault(float(proc[q]), []).append(int(q))
    for p in lone[np.argsort(rows[lone], kind="stable")]:
        candidates = waiting.get(float(proc[p]), [])
        for j in range(len(candidates) - 1, -1, -1):
            q = candidates[j]
            if rows[q] < rows[p] and (key[p] == -1 or key[q] == key[p]):
                comp_pos[np.searchsorted(inv_pos, q)] = p
                del candidates[j]
                break


def _take(col: pd.Series, rows: np.ndarray) -> np.ndarray:
    """``col`` at ``rows`` as a fresh, writable array: categorical text becomes object (None for
    missing), converting only the categories and taking by code, so 1M-row columns are never
    materialised."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        cats = np.concatenate([np.asarray(col.cat.categories, dtype=object), np.array([None], dtype=object)])
        return cats[col.cat.codes.to_numpy()[rows]]
    return col.to_numpy()[rows]


def _assemble(h: pd.DataFrame, inv_rows: np.ndarray, comp_rows: np.ndarray,
              extra: tuple[str, ...] = (), comp_extra: tuple[str, ...] = ()) -> pd.DataFrame:
    """One row per invoke: its fields (and the ``extra`` invoke columns), and its completion's fields
    (and ``comp_extra``; suffix ``_c``) when there is one."""
    has = comp_rows >= 0
    safe = np.where(has, comp_rows, 0)
    out: dict[str, np.ndarray] = {"i": inv_rows}
    for col in _INVOKE_COLS + extra:
        out["t_inv" if col == "time" else col] = _take(h[col], inv_rows)
    for col in _COMPLETE_COLS + comp_extra:
        vals = _take(h[col], safe)
        if vals.dtype == object:
            vals[~has] = None
        else:
            vals = vals.astype("float64")  # a fresh array: NaN can be written in place
            vals[~has] = np.nan
        out[{"time": "t_comp", "type": "status"}.get(col, f"{col}_c")] = vals
    status = out["status"]
    status[~has] = "open"
    out["indeterminate"] = np.isin(status, INDETERMINATE)
    return frame_of(out)


def frame_of(columns: dict[str, np.ndarray]) -> pd.DataFrame:
    """An operation frame from fresh arrays, each column of one value held once (:func:`_shared_if_constant`).

    Text stays object: pandas 3 would otherwise infer its arrow-backed string dtype, whose conversions and
    comparisons cost more than the whole pairing. copy=False: the arrays are fresh, owned by nobody else."""
    cols = {k: pd.Series(_shared_if_constant(v), dtype=object, copy=False) if v.dtype == object
            else _shared_if_constant(v) for k, v in columns.items()}
    return pd.DataFrame(cols, copy=False)


_COPY_ON_WRITE = int(pd.__version__.split(".")[0]) >= 3  # always on from pandas 3 (pandas 2.1+ is declared)


def _shared_if_constant(values: np.ndarray) -> np.ndarray:
    """``values``, or, when they are all one value, that value seen through a read-only view of stride 0:
    every one missing (None or NaN; None for text), or every one the same text.

    Why: each kind leaves columns of the common set empty (a claim has no ``outcome``, a register no
    ``gen``, nobody but a fault a ``target``): on the 1M-event check_1m history, 28 columns of 120k+
    Nones and NaNs, 28 MB held through the whole check. And a kind's text columns are often one word
    throughout (its ``f``, an ok ``status``, a finish's reply ``true``): 8 MB more, and so is the copy of
    the accepted finishes (:func:`takeover._internal.checker.facts.build_facts`). Only text is shared
    beyond the missing: equal strings are the same value, where 1, 1.0 and True are equal numbers of
    three types. Read-only is safe under copy-on-write (pandas 3: a write copies first); before pandas 3
    the array is kept as it is."""
    if not _COPY_ON_WRITE or len(values) < 2 or values.strides == (0,):
        return values
    first = values[0]
    if values.dtype == object:
        if type(first) is str:
            if (values[-1] is not first and values[-1] != first) or not (values == first).all():
                return values
            return np.broadcast_to(np.array(first, dtype=object), values.shape)
        if not pd.isna(first) or pd.notna(values).any():
            return values
        return np.broadcast_to(np.array(None, dtype=object), values.shape)
    if values.dtype.kind != "f" or not np.isnan(first) or not np.isnan(values).all():
        return values
    return np.broadcast_to(np.array(np.nan, dtype=values.dtype), values.shape)
