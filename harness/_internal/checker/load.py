"""Loading a stored run folder: the only input the checker has.

Why a separate module: the checker must never depend on the runner, so everything it knows comes
from files written by the run (history, ledger, snapshot, config). Bad input is refused here, in
one line, before any analysis starts; missing *optional* evidence (a snapshot the coordinator never
wrote, a ledger the service never created) is recorded so that the invariants needing it become
"unknown" instead of guessing.
"""

from __future__ import annotations

import ctypes
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from takeover._internal import store
from takeover._internal.history import COLUMNS, ReadStats, read_history
from takeover.errors import UsageError

# What the checker reads of the ledger (``worker`` is not needed: ``process`` names the incarnation).
LEDGER_COLUMNS = ("seq", "task_id", "generation", "process", "t", "reply", "performed", "result")
_LEDGER_TEXT = ("task_id", "reply", "result")
# The history columns the checker and reports use: ``pid``, ``lease`` (requested) and ``error``
# are for people reading the file, and not parsing them saves a quarter of the read. They are
# still present in the frame, all missing.
UNUSED_HISTORY_COLUMNS = ("pid", "lease", "error")
HISTORY_COLUMNS = tuple(c for c in COLUMNS if c not in UNUSED_HISTORY_COLUMNS)
_T = TypeVar("_T")


@dataclass
class RunData:
    """Everything one run left behind, parsed but not yet interpreted."""

    run_dir: Path
    history: pd.DataFrame
    stats: ReadStats
    config: dict[str, Any]
    snapshot: pd.DataFrame | None  # columns task, state, gen, lease_until; None when absent
    snapshot_time: float | None
    snapshot_error: str | None
    ledger: pd.DataFrame | None  # None when the run has no ledger
    notes: list[str] = field(default_factory=list)  # why some evidence is missing
    # The mid-run snapshot probes' rows (probes.jsonl, takeover._internal.checker.probes): columns probe, task,
    # state, gen, lease_until; None when the run has no probes. ``probe_totals``: each probe's row count
    # in the queue (above the rows kept when a large table was sampled).
    probes: pd.DataFrame | None = None
    probe_totals: dict[int, int] = field(default_factory=dict)


def load_run(run_dir: str | Path) -> RunData:
    """Parse a run folder, or raise :class:`UsageError` naming what makes it not a run."""
    path = store.require_run_folder(run_dir)
    history_path = path / store.HISTORY_FILE
    config = store.read_config(path)
    snap_notes: list[str] = []
    ledger_notes: list[str] = []
    # The snapshot and the ledger load on a second thread while pyarrow parses the history: the
    # parser holds no GIL and SQLite's stepping releases it, so this hides most of their cost.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="takeover-load") as pool:
        side = pool.submit(_trimmed, lambda: (_load_snapshot(path, snap_notes),
                                              _load_ledger(path / store.LEDGER_FILE, ledger_notes),
                                              load_probes(path / store.PROBES_FILE)))
        try:
            history, stats = read_history(history_path, HISTORY_COLUMNS)
        except OSError as exc:
            raise UsageError(f"cannot read {history_path}: {exc.strerror or exc}") from None
        except Exception as exc:  # noqa: BLE001 - an unreadable history is bad input, in one line
            raise UsageError(f"{history_path} is not a readable history: {type(exc).__name__}: {exc}") from None
        (snapshot, snap_time, snap_error), ledger, (probes, totals) = side.result()
    notes = snap_notes + ledger_notes
    return RunData(path, history, stats, config, snapshot, snap_time, snap_error, ledger, notes, probes, totals)


def _trimmed(load: Callable[[], _T]) -> _T:
    """``load()``, then the C heap's free pages handed back (:func:`_return_freed_heap`), on the side thread.

    Why there and then, not once the history is read: the side thread is done long before the parse (0.3
    of 1.2 s), and its garbage stayed resident beside the history's columns being joined, where the
    load's peak is."""
    try:
        return load()
    finally:
        _return_freed_heap()


def _return_freed_heap() -> None:
    """Hand the C heap's free pages back to the system (glibc's ``malloc_trim``; elsewhere nothing).

    Why: the ledger and snapshot are loaded on the side thread, in that thread's own heap, as Python
    objects most of which are freed once their frames are built. Nothing the checker does later
    allocates from that thread's heap, so its free pages stayed resident through the whole check: on
    the check_1m history 16-20 MB of the peak (424-429 MB -> 408-409 MB), for 2 ms. (``malloc_trim``
    trims every thread's heap, whichever thread calls it.)"""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return
    trim(0)


PROBE_COLUMNS = ("probe", "task", "state", "gen", "lease_until")


def load_probes(path: Path) -> tuple[pd.DataFrame | None, dict[int, int]]:
    """probes.jsonl as one frame, a row per task per probe; (None, {}) without the file. A line that
    does not parse (the probe process was killed while writing it) is skipped: its probe then has no
    rows, and a probe without rows is not judged."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None, {}
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    import orjson

    numbers: list[int] = []
    rows: list[list[Any]] = []
    totals: dict[int, int] = {}
    for line in raw.splitlines():
        try:
            data = orjson.loads(line)
            number, tasks = int(data["probe"]), data["tasks"]
            if not isinstance(tasks, list) or not all(isinstance(r, list) and len(r) == 4 for r in tasks):
                continue
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            continue
        totals[number] = int(data.get("total", len(tasks)))
        numbers += [number] * len(tasks)
        rows += tasks
    cols = list(zip(*rows, strict=True)) if rows else [(), (), (), ()]
    frame = pd.DataFrame({"probe": np.asarray(numbers, dtype="float64")})
    for name, col in zip(PROBE_COLUMNS[1:], cols, strict=True):
        values = np.array(col, dtype=object)
        frame[name] = _text(values) if name in ("task", "state") else _numbers(values)
    return frame, totals


def _load_snapshot(run_dir: Path, notes: list[str]) -> tuple[pd.DataFrame | None, float | None, str | None]:
    data = store.read_snapshot(run_dir)
    if data is None:
        notes.append(f"{store.SNAPSHOT_FILE} is missing: the final state cannot be compared with the history")
        return None, None, f"{store.SNAPSHOT_FILE} missing"
    snap_time = data.get("time")
    if "error" in data and "tasks" not in data:
        notes.append(f"the queue could not produce a snapshot: {data['error']}")
        return None, snap_time, str(data["error"])
    rows = data.get("tasks")
    # map() over builtins, not a generator per row: the same test at C speed on 100k+ rows.
    if not isinstance(rows, list) or not set(map(type, rows)) <= {list, tuple} or not set(map(len, rows)) <= {4}:
        raise UsageError(f"{run_dir / store.SNAPSHOT_FILE}: 'tasks' must be a list of [task_id, state, generation, "
                         "lease_until]")
    cols = list(zip(*rows, strict=True)) if rows else [(), (), (), ()]
    frame = pd.DataFrame({name: pd.Series(col, dtype=object)
                          for name, col in zip(("task", "state", "gen", "lease_until"), cols, strict=True)})
    for col in ("task", "state"):  # ids may be numbers in a foreign queue's snapshot: compare as text
        frame[col] = _text(frame[col].to_numpy(dtype=object))
    # One object per state: the 100k+ copies of "done" the JSON parser made, outliving the rows around
    # them, held every memory arena they were in (26 MB on the check_1m history, through the whole check).
    frame["state"] = pd.Series(_one_per_value(frame["state"].to_numpy(dtype=object)), dtype=object, copy=False)
    frame["gen"] = _numbers(frame["gen"].to_numpy(dtype=object))
    frame["lease_until"] = _numbers(frame["lease_until"].to_numpy(dtype=object))
    return frame, snap_time, None


def _load_ledger(path: Path, notes: list[str]) -> pd.DataFrame | None:
    if not path.is_file():
        notes.append(f"{store.LEDGER_FILE} is missing: duplicate side effects cannot be counted")
        return None
    # Read-only: re-checking a run must never change it. ``immutable`` is the fallback for a
    # read-only folder, where SQLite cannot create the -shm file that WAL readers need.
    for uri in (f"file:{path}?mode=ro", f"file:{path}?immutable=1"):
        try:
            conn = sqlite3.connect(uri, uri=True)
            try:
                cols = {row[1] for row in conn.execute("PRAGMA table_info(actions)")}
                if not cols:
                    notes.append(f"{store.LEDGER_FILE} has no 'actions' table: duplicates cannot be counted")
                    return None
                wanted = [c for c in LEDGER_COLUMNS if c in cols]
                query = f"SELECT {', '.join(wanted)} FROM actions ORDER BY seq"
                frame = _arrow_ledger(uri, query, wanted)
                if frame is None:
                    frame = _ledger_frame(conn.execute(query), wanted)
            finally:
                conn.close()
            break
        except sqlite3.Error as exc:
            last = exc
    else:
        raise UsageError(f"{path} is not a readable ledger: {last}") from None
    for col in LEDGER_COLUMNS:
        if col not in frame:
            frame[col] = pd.Series(np.nan if col not in _LEDGER_TEXT else None, index=frame.index,
                                   dtype="float64" if col not in _LEDGER_TEXT else object)
    frame = frame.rename(columns={"task_id": "task", "generation": "gen"})
    frame["performed"] = frame["performed"].fillna(0).astype("int64")
    return frame


_ARROW_NUMBERS = ("int64", "double", "null")


def _arrow_ledger(uri: str, query: str, wanted: list[str]) -> pd.DataFrame | None:
    """What :func:`_ledger_frame` makes of ``query``'s rows, read by SQLite's ADBC driver as Arrow columns; None
    when the driver is not installed, cannot read the ledger, or finds anything but what takeover's own ledger
    holds (numbers in the number columns, text in the text ones): :func:`_ledger_frame` then reads it row by
    row, as it always did, and takes whatever the file holds.

    Why: the sqlite3 module builds a Python object per value (a million for the check_1m ledger's 125k rows)
    only for them to be turned into arrays: 180-240 ms of CPU time, against 60-80 ms for the driver's Arrow
    columns and their conversion. The driver types each column from the rows it reads first and refuses a
    later row of another type, which is one of the cases handed back."""
    try:
        import adbc_driver_sqlite.dbapi as adbc
    except ImportError:
        return None
    import pyarrow as pa

    try:
        with adbc.connect(uri) as conn, conn.cursor() as cursor:
            cursor.execute(query)
            table = cursor.fetch_arrow_table()
    except Exception:  # noqa: BLE001 - any failure of the fast reader: the row-by-row one decides
        return None
    if table.column_names != wanted:
        return None
    out: dict[str, object] = {}
    for name, col in zip(wanted, table.columns, strict=True):
        kind = str(col.type)
        if name in _LEDGER_TEXT:
            if not pa.types.is_string(col.type) and not pa.types.is_null(col.type):
                return None
            values = col.to_numpy(zero_copy_only=False).astype(object, copy=False)
            out[name] = _text(values) if name == "task_id" else _categorical(values)
        elif kind in _ARROW_NUMBERS:
            out[name] = col.to_numpy(zero_copy_only=False).astype("float64")
        else:
            return None
    del table
    return pd.DataFrame(out)


# Rows of the ledger turned into arrays at a time. Why in chunks: fetchall() built every row as a tuple
# of Python objects (125k rows, ~45 MB on the check_1m history), all freed at once after the conversion
# but interleaved with the task ids that live on, so the allocator kept most of it: the ledger's load left
# 78 MB of resident memory for a 12 MB frame. A chunk's garbage is reused by the next one.
_LEDGER_CHUNK = 8192


def _ledger_frame(cursor: sqlite3.Cursor, wanted: list[str]) -> pd.DataFrame:
    """Column by column, numbers as float64 and text as object (task ids) or categorical (the
    handful of replies and results): no per-cell type inference, and no string dtype round trips.
    Read in chunks; the replies and results of each chunk are replaced by one object per distinct
    value, so that only the task ids stay behind as Python objects. Numbers are converted a chunk at
    a time (:func:`_numbers`: a value that is not a number becomes NaN either way)."""
    parts: dict[str, list[np.ndarray]] = {name: [] for name in wanted}
    same: dict[object, object] = {}
    while rows := cursor.fetchmany(_LEDGER_CHUNK):
        table = np.empty((len(rows), len(wanted)), dtype=object)
        table[:] = rows  # one C pass over the rows, where zip(*rows) built a tuple per column
        for j, name in enumerate(wanted):
            values = table[:, j]
            if name == "task_id":
                parts[name].append(values.copy())  # kept: not a view that holds the whole chunk's table
            elif name in _LEDGER_TEXT:
                shared = _one_per_value(values, same)
                parts[name].append(shared if shared is not values else values.copy())
            else:
                parts[name].append(_numbers(values))
        del rows, table
    out: dict[str, object] = {}
    for name in wanted:
        chunks = parts.pop(name)
        if name == "task_id":
            out[name] = _text(np.concatenate(chunks) if chunks else np.zeros(0, dtype=object))
        elif name in _LEDGER_TEXT:
            out[name] = _categorical(np.concatenate(chunks) if chunks else np.zeros(0, dtype=object))
        else:
            out[name] = np.concatenate(chunks) if chunks else np.zeros(0, dtype="float64")
    return pd.DataFrame(out)


def _one_per_value(values: np.ndarray, same: dict[object, object] | None = None) -> np.ndarray:
    """``values`` (object) with one object per distinct value (the first seen, or the one in ``same``),
    missing as None: the same values (only text is shared), and a column of a handful of replies no
    longer holds 100k+ strings of its own."""
    codes, uniques = pd.factorize(values)
    if not all(type(u) is str for u in uniques):  # factorize takes 1, 1.0 and True for one value
        return values
    same = {} if same is None else same
    one = np.array([same.setdefault(u, u) for u in uniques] + [None], dtype=object)
    return one[codes]  # code -1 (missing) takes the trailing None


def _categorical(values: np.ndarray) -> pd.Categorical:
    """What ``pd.Categorical(values)`` gives (categories sorted, missing as -1), factorized as
    object: pandas 3 would first convert all 125k replies to its arrow string dtype to find the
    two or three distinct ones. Anything that does not sort (mixed types) takes the plain way."""
    codes, uniques = pd.factorize(values)
    try:
        categories = pd.Index(sorted(uniques))
    except TypeError:
        return pd.Categorical(values)
    if not categories.is_unique or len(categories) != len(uniques):
        return pd.Categorical(values)
    remap = categories.get_indexer(pd.Index(uniques, dtype=object))
    if (remap < 0).any():
        return pd.Categorical(values)
    mapped = np.where(codes < 0, -1, remap[np.maximum(codes, 0)]) if len(uniques) else codes
    return pd.Categorical.from_codes(mapped, dtype=pd.CategoricalDtype(categories))


def _text(values: np.ndarray) -> pd.Series:
    """Task ids and states as object text (numbers from a foreign queue become their str);
    object, not pandas 3's string dtype, whose conversions cost more than the check."""
    if pd.api.types.infer_dtype(values, skipna=False) != "string":
        values = np.array([None if v is None else str(v) for v in values], dtype=object)
    return pd.Series(values, dtype=object, copy=False)


def _numbers(values: np.ndarray) -> np.ndarray:
    """float64, None as NaN; anything that is not a number becomes NaN, as ``pd.to_numeric`` coerces."""
    try:
        return values.astype("float64")
    except (TypeError, ValueError):
        return pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(dtype="float64",
                                                                                          na_value=np.nan)
