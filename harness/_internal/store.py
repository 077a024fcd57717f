"""The run folder: every file a run, a soak, a sweep or a hunt leaves behind, by name, with its reader and writer.

Why one module: the run folder is the only thing that passes between the roles. The run writes it,
the checker reads it (and nothing else: not the runner, not the queue's code), the reports are
written into it, and ``takeover check`` re-reads it months later. Its file names and JSON shapes
are therefore a public format (docs/design.md, "The run folder"), and a format is easiest to keep
when one place defines it, as Jepsen's ``store.clj`` does for its test folders. Every other module
takes its file names from here and never spells one itself.

What stays elsewhere, and why: the history (``history.jsonl``) is written and parsed by
:mod:`takeover._internal.history`, the ledger (``ledger.sqlite``) by the service's
:mod:`takeover._internal.run.ledger` and read into frames by :mod:`takeover._internal.checker.load`, and the soak's
``resources.csv`` by :mod:`takeover._internal.soak.resources`. Each of those is a format of its own with
one owner; this module names the files and owns the JSON files around them.

Why checks come apart from creation (``check_out`` / ``create``): ``--out`` must be judged
(writable? already used?) before anything starts, so bad input costs nothing; the folder itself is
created only once every other check has passed.

This module imports nothing of the runner, the checker or the reports, so each of them can use it.
"""

from __future__ import annotations

import csv
import json
import os
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import orjson

from takeover.errors import UsageError

if TYPE_CHECKING:
    from takeover.summary_types import Summary

# -- a run folder (takeover stress; each soak segment; each sweep cell) -------------------------------
CONFIG_FILE = "config.json"  # the resolved RunConfig, the reproduce line, the queue's capabilities
QUEUE_FILE = "queue.sqlite"  # the queue's own file (SQLite adds -wal and -shm beside it)
LEDGER_FILE = "ledger.sqlite"  # the external service's record of every action request
HISTORY_FILE = "history.jsonl"  # every operation of every process (docs/history.md)
HISTORY_GZ_FILE = "history.jsonl.gz"  # a soak's failed segment past its keep limit keeps this instead
SNAPSHOT_FILE = "snapshot.json"  # the queue's final state, after every recorded operation
PROBES_FILE = "probes.jsonl"  # the mid-run snapshot probes' rows, one probe a line (takeover._internal.run.probes)
SUMMARY_FILE = "summary.json"  # the checker's verdict, invariants, duplicates and counts
VIOLATIONS_CSV = "violations.csv"  # every violation of every invariant, one row each (summary.json has examples)
RECONCILE_FILE = "reconcile.json"  # every reconciliation pass over the run
REPORT_MD = "report.md"
REPORT_HTML = "report.html"
JUNIT_XML = "junit.xml"
# With --power-loss-rate the queue's files live in POWERLOSS_DISK, shown at POWERLOSS_MOUNT by the FUSE
# layer (takeover._internal.powerloss) while the run lasts; at the end they move back to QUEUE_FILE's place and both
# folders go. POWERLOSS_LOG keeps libfuse's own messages.
POWERLOSS_DISK = "powerloss-disk"
POWERLOSS_MOUNT = "powerloss-mnt"
POWERLOSS_LOG = "powerloss.log"
ADAPTER_LOG = "adapter.log"  # an exec: queue's adapters' stderr (takeover._internal.bridge); no other run has one
REPORT_FILES = (REPORT_MD, REPORT_HTML, JUNIT_XML)  # in the order the short summary names them

# ``config.json`` key the coordinator adds once it has opened the queue: which optional contract
# methods (takeover.contract.EXTENSIONS) the queue offers, so the checker need not import it.
QUEUE_CAPABILITIES = "queue_capabilities"

# -- a soak folder (its segments are run folders inside it; its reports use the names above) ----------
SOAK_FILE = "soak.json"  # the interim and final summary, rewritten at every checkpoint
RESOURCES_FILE = "resources.csv"  # one sample per row: memory, open files, file sizes
RESOURCES_PNG = "resources.png"

# -- a sweep folder (its runs are run folders under cells/) ------------------------------------------
SWEEP_CSV = "sweep.csv"  # one row per run
SWEEP_GRID = "grid.json"  # the grid as it was expanded
SWEEP_MD = "sweep.md"
SWEEP_HTML = "sweep.html"
SWEEP_CELLS = "cells"

# -- a tune folder (takeover tune: the search's runs are run folders under cells/, as a sweep's) ---------------
TUNE_JSON = "tuning.json"  # the recommendation in production units, the evidence and the command
TUNE_MD = "tuning.md"
TUNE_HTML = "tuning.html"
TUNE_CSV = "tune.csv"  # one row per run, the sweep's columns (scaled units, as the runs saw them)

# -- a hunt folder (takeover hunt: one run folder per seed tried, the valid ones pruned) --------------------
HUNT_FILE = "hunt.json"  # every run tried (seed, mode, mix, verdict), and the violation found, if any
HUNT_RUN_PREFIX = "seed-"  # the run folder of seed N is seed-N


def hunt_run_name(seed: int) -> str:
    """The folder, inside a hunt folder, of the run with ``seed``."""
    return f"{HUNT_RUN_PREFIX}{seed}"


DEFAULT_BASE = "runs"  # where runs go without --out
LATEST = "latest"  # runs/latest: a symlink to the newest run folder


WAL_SUFFIX, SHM_SUFFIX = "-wal", "-shm"  # SQLite's files beside a database in WAL mode


def sqlite_files(name: str) -> tuple[str, str, str]:
    """A SQLite file's name and the two files WAL mode keeps beside it."""
    return name, name + WAL_SUFFIX, name + SHM_SUFFIX


# -- creating a run folder --------------------------------------------------------------------------------
def check_out(out: str | None) -> None:
    """Raise UsageError when the run folder could not be created; create nothing."""
    target = Path(out) if out else Path(DEFAULT_BASE)
    if target.exists():
        if not target.is_dir():
            raise UsageError(f"--out {str(target)!r} exists and is not a directory")
        if out and any(target.iterdir()):
            raise UsageError(f"--out {str(target)!r} already exists and is not empty; choose a new folder")
        if not os.access(target, os.W_OK | os.X_OK):
            raise UsageError(f"--out {str(target)!r} is not writable")
        return
    parent = target.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():  # e.g. --out afile/run: no permission would help
        raise UsageError(f"cannot create --out {str(target)!r}: {str(parent)!r} is not a directory")
    if not _can_create_in(parent):
        raise UsageError(f"cannot create --out {str(target)!r}: {str(parent)!r} is not writable")


def fresh_out(out: str | None, kind: str) -> Path:
    """The folder of a command of many runs (``kind``: sweep, tune): ``--out``, else ``runs/KIND-<timestamp>``.
    Raises UsageError when it exists and is not an empty folder; creates nothing."""
    path = Path(out) if out else Path(DEFAULT_BASE) / time.strftime(f"{kind}-%Y%m%d-%H%M%S")
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise UsageError(f"--out {str(path)!r} exists and is not an empty folder")
    return path


def _can_create_in(folder: Path) -> bool:
    """Permission bits lie (root, read-only mounts, /proc): try a throw-away folder and remove it."""
    if not os.access(folder, os.W_OK | os.X_OK):
        return False
    try:
        probe = tempfile.mkdtemp(prefix=".takeover-probe-", dir=folder)
    except OSError:
        return False
    os.rmdir(probe)
    return True


def create(out: str | None) -> Path:
    """Make the run folder (``runs/<timestamp>`` by default) and point ``runs/latest`` at it."""
    if out:
        run_dir = Path(out)
        run_dir.mkdir(parents=True, exist_ok=True)
    else:
        base = Path(DEFAULT_BASE)
        base.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        run_dir = base / stamp
        n = 1
        while True:
            try:
                run_dir.mkdir()
                break
            except FileExistsError:
                n += 1
                run_dir = base / f"{stamp}-{n}"
    if run_dir.absolute().parent.name == DEFAULT_BASE:
        point_latest(run_dir)
    return run_dir


def point_latest(run_dir: Path) -> None:
    """Atomic replace of the ``latest`` symlink, so readers never see it missing."""
    link = run_dir.absolute().parent / LATEST
    tmp = link.with_name(f".{LATEST}.{os.getpid()}")
    try:
        if tmp.is_symlink():
            tmp.unlink()
        tmp.symlink_to(run_dir.name)
        os.replace(tmp, link)
    except OSError:
        pass  # a filesystem without symlinks: the folder itself is what matters


def require_run_folder(run_dir: str | Path) -> Path:
    """The folder, or a one-line UsageError naming what makes it not a run folder.

    A run folder has at least its history and its config; everything else (snapshot, ledger) may be
    missing, and the checker then says which conclusions that leaves unknown.
    """
    path = Path(run_dir)
    if not path.exists():
        raise UsageError(f"run folder {str(path)!r} does not exist")
    if not path.is_dir():
        raise UsageError(f"{str(path)!r} is not a run folder (not a directory)")
    missing = [name for name in (HISTORY_FILE, CONFIG_FILE) if not (path / name).is_file()]
    if missing:
        raise UsageError(f"{str(path)!r} is not a run folder: missing {' and '.join(missing)}")
    return path


# -- JSON files ---------------------------------------------------------------------------------------------
def json_default(obj: Any) -> Any:
    """numpy scalars (the checker's counts) as plain numbers; anything else as its text."""
    if hasattr(obj, "item"):
        return obj.item()
    return str(obj)


def write_json(path: Path, data: Any) -> None:
    """Write then rename: an interrupted write never leaves a half file that looks complete."""
    _replace(path, json.dumps(data, indent=1) + "\n")


def _replace(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def loads_json(raw: str | bytes, *, fast: bool = False) -> Any:
    """Parse JSON text; every way it can fail is a ``ValueError`` whose text says what is wrong.

    Why one function: ``json.loads`` has more ways to fail than a ``JSONDecodeError``. Deep nesting
    (100,000 ``[``) raises ``RecursionError``, and an integer of more than 4300 digits a plain
    ``ValueError`` (Python's limit on integer text). Each caller caught a different subset, and the
    rest reached the user as a traceback. ``fast`` (the snapshot, 100k+ tasks) tries orjson first:
    it is several times faster, and refuses a few things json accepts (NaN, lone surrogates), which
    then go to json; config.json stays with json alone, since orjson reads an integer past 64 bits (a
    seed) as a float."""
    try:
        if fast:
            try:
                return orjson.loads(raw)
            except orjson.JSONDecodeError:
                pass
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise ValueError("nested too deeply to read (more than Python's recursion limit)") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def read_json(path: Path, what: str = "JSON") -> Any:
    """A JSON file's value; a file that is missing, unreadable or not JSON is one :class:`UsageError`
    naming the file and what is wrong with it (``what``: what the file should be, for the message)."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {path} ({what}): {exc.strerror or exc}") from None
    try:
        return loads_json(raw)
    except ValueError as exc:
        raise UsageError(f"{path} is not valid JSON ({what}): {exc}") from None


def read_json_object(path: Path, what: str = "a JSON object", *, fast: bool = False,
                     keys: Mapping[str, type | tuple[type, ...]] | None = None) -> dict[str, Any]:
    """A JSON file that must hold an object (with ``keys``: each of them, of that type); anything else is
    one :class:`UsageError` naming the file and what is wrong: the one reader of every JSON file takeover
    is handed back (a run folder's, a shard's, a hunt's, a soak's), so a damaged file is never a traceback."""
    try:
        data = loads_json(Path(path).read_bytes(), fast=fast)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UsageError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path} must hold {what}, not {_json_type(data)}")
    for key, kind in (keys or {}).items():
        if key not in data:
            raise UsageError(f"{path} must hold {what}: its key {key!r} is missing")
        value = data[key]
        if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, float, (int, float))):
            names = " or ".join(_json_type(t) for t in (kind if isinstance(kind, tuple) else (kind,)))
            raise UsageError(f"{path} must hold {what}: its {key!r} must be {names}, not {_json_type(value)}")
    return data


def _json_type(value: Any) -> str:
    """What a JSON value (or a Python type standing for one) is called in an error message."""
    kind = value if isinstance(value, type) else type(value)
    return {dict: "an object", list: "a list", str: "text", int: "an integer", float: "a number", bool: "true or false",
            type(None): "null"}.get(kind, kind.__name__)


# -- config.json ----------------------------------------------------------------------------------------------
def write_config(run_dir: Path, config: Mapping[str, Any], capabilities: Mapping[str, bool] | None = None) -> None:
    """``config.json``: the resolved config and its reproduce line (``RunConfig.to_dict()``: the store
    knows the run folder's files, not the config's class), and (once the queue is open) which
    optional methods the queue has.

    Written twice by the coordinator: first before anything starts, so even a run whose queue never
    opened can be re-checked and reproduced; then again with the capabilities as soon as the queue
    is open. The capabilities are not part of the config: the seed bank leaves them out of its key
    and the reproduce line never names them.
    """
    data = dict(config)
    if capabilities is not None:
        data[QUEUE_CAPABILITIES] = dict(capabilities)
    _replace(run_dir / CONFIG_FILE, json.dumps(data, indent=2, sort_keys=True) + "\n")


def read_config(run_dir: str | Path) -> dict[str, Any]:
    """``config.json`` as stored (keys a newer or older takeover wrote included)."""
    return read_json_object(Path(run_dir) / CONFIG_FILE)


# -- snapshot.json --------------------------------------------------------------------------------------------
def write_snapshot(run_dir: Path, rows: Sequence[Sequence[Any]] | None, error: str | None = None) -> dict[str, Any]:
    """``snapshot.json`` exactly as docs/history.md pins it: the tasks, or why there are none."""
    data: dict[str, Any] = {"time": time.time()}
    if error is not None:
        data["error"] = error
    else:
        data["tasks"] = [[str(r[0]), str(r[1]), int(r[2]), None if r[3] is None else float(r[3])]
                         for r in rows or ()]
    # Compact: one task per line would be nicer to read but 10k tasks stay small either way.
    _replace(run_dir / SNAPSHOT_FILE, json.dumps(data, separators=(",", ":")) + "\n")
    return data


def read_snapshot(run_dir: Path) -> dict[str, Any] | None:
    """``snapshot.json`` as stored (``tasks`` or ``error``, and ``time``); None when there is none."""
    path = run_dir / SNAPSHOT_FILE
    if not path.is_file():
        return None
    return read_json_object(path, "a JSON object with 'tasks' or 'error'", fast=True)


# -- summary.json ---------------------------------------------------------------------------------------------
def write_summary(run_dir: Path, summary: Summary) -> str:
    """``summary.json``, the checker's result; returns its file name for the list of files written."""
    (run_dir / SUMMARY_FILE).write_text(dump_summary(summary))
    return SUMMARY_FILE


def dump_summary(summary: Summary) -> str:
    """The summary as ``summary.json`` holds it (and ``takeover check --json`` prints it)."""
    return json.dumps(summary, indent=2, default=json_default) + "\n"


def read_summary(run_dir: Path) -> Summary | None:
    """The checker's ``summary.json``; None when the run was never checked.

    Typed as the checker writes it: the callers read the summary of a run this takeover has just
    checked. A summary written by another version may lack a key or hold another shape."""
    path = run_dir / SUMMARY_FILE
    if not path.is_file():
        return None
    return cast("Summary", read_json_object(path))


def read_confirmations(run_dir: Path) -> dict[tuple[str, str], str]:
    """The confirmations an earlier check of this folder noted on its diagnosis, by (scenario,
    invariant): what the spec's scenarios answered when they ran against the run's queue right after
    the run (``takeover stress``). A re-check reads them back so it keeps what it cannot redo from the
    folder alone. A confirmation depends on nothing else: the queue is the folder's, and which step
    confirms a pattern is chosen by the pattern's scenario and invariant only.

    Empty where there is no summary.json yet, or one that is not readable or not of this shape (a
    summary written by another version, or damaged): the re-check rewrites it, as it always has."""
    path = run_dir / SUMMARY_FILE
    try:
        data = loads_json(path.read_bytes()) if path.is_file() else None
    except (OSError, ValueError):
        return {}
    entries = data.get("diagnosis") if isinstance(data, dict) else None
    found: dict[tuple[str, str], str] = {}
    for entry in entries if isinstance(entries, list) else ():
        if not isinstance(entry, dict):
            continue
        scenario, invariant, text = entry.get("scenario"), entry.get("invariant"), entry.get("confirmed_by")
        if isinstance(scenario, str) and isinstance(invariant, str) and isinstance(text, str) and text:
            found.setdefault((scenario, invariant), text)
    return found


# -- violations.csv -------------------------------------------------------------------------------------------
# The columns every row has, whatever its invariant; each invariant's own fields (its examples' keys in
# summary.json) follow, in the order they first appear.
VIOLATION_COLUMNS = ("invariant", "pattern", "task", "at", "generations", "processes", "cause")


def write_violations(run_dir: Path, rows: Sequence[Mapping[str, Any]]) -> str:
    """``violations.csv``: one row per violation (header only when there is none); returns its name.

    ``at`` is the violating operation's time in seconds since the run started (empty for what only
    the final snapshot shows), ``generations`` and ``processes`` the ones involved, space-separated, ``cause``
    the fault that explains it (takeover._internal.checker.network.violation_cause: a network fault or a power loss;
    empty when none does).
    A list or an object in a field is written as JSON; a missing value as an empty cell."""
    columns = list(dict.fromkeys([*VIOLATION_COLUMNS, *(k for row in rows for k in row)]))

    def cell(value: Any) -> Any:
        if value is None or (isinstance(value, float) and value != value):
            return ""
        if isinstance(value, list | tuple | dict):
            return json.dumps(value, default=json_default)
        return value.item() if hasattr(value, "item") else value

    tmp = run_dir / f".{VIOLATIONS_CSV}.tmp"
    with tmp.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(columns)
        writer.writerows([cell(row.get(c)) for c in columns] for row in rows)
    os.replace(tmp, run_dir / VIOLATIONS_CSV)
    return VIOLATIONS_CSV


# -- reconcile.json -------------------------------------------------------------------------------------------
def read_reconcile_record(run_dir: Path) -> dict[str, Any] | None:
    """The earlier passes' record, or None when there is none (or it cannot be read: a new pass
    then starts the record afresh)."""
    try:
        data = json.loads((run_dir / RECONCILE_FILE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_reconcile_record(run_dir: Path, record: Mapping[str, Any]) -> None:
    write_json(run_dir / RECONCILE_FILE, record)


# -- soak.json ------------------------------------------------------------------------------------------------
def write_soak_summary(root: Path, summary: Mapping[str, Any]) -> None:
    write_json(root / SOAK_FILE, summary)


def read_soak_summary(root: Path) -> dict[str, Any] | None:
    """The soak's ``soak.json``; None when the soak never wrote one."""
    path = root / SOAK_FILE
    if not path.is_file():
        return None
    return read_json_object(path)


# -- hunt.json ------------------------------------------------------------------------------------------------
def write_hunt_summary(root: Path, summary: Mapping[str, Any]) -> None:
    write_json(root / HUNT_FILE, summary)


def read_hunt_summary(root: Path) -> dict[str, Any] | None:
    """The hunt's ``hunt.json``; None when the hunt never wrote one. Its runs are checked to be rows with
    a number, a verdict and a folder (what a merge of hunts reads of them): a damaged file is one line."""
    path = root / HUNT_FILE
    if not path.is_file():
        return None
    what = "a hunt's summary (status, runs)"
    doc = read_json_object(path, what, keys={"status": str, "runs": list})
    for row in doc["runs"]:
        if not (isinstance(row, dict) and type(row.get("run")) is int and isinstance(row.get("verdict"), str)
                and isinstance(row.get("run_dir"), str)):
            raise UsageError(f"{path} must hold {what}: every run must be an object with 'run' (an integer), "
                             f"'verdict' and 'run_dir' (texts), not {str(row)[:80]}")
    elapsed = doc.get("elapsed_s", 0)
    if not isinstance(elapsed, int | float) or isinstance(elapsed, bool):
        raise UsageError(f"{path} must hold {what}: its 'elapsed_s' must be a number, not {_json_type(elapsed)}")
    found = doc.get("found")
    if found is not None and not (isinstance(found, dict) and type(found.get("run")) is int
                                  and all(isinstance(found.get(k), str) for k in ("run_dir", "mode", "command"))
                                  and isinstance(found.get("violated"), dict) and "seed" in found
                                  and all(isinstance(v, str) for v in found["violated"])):
        raise UsageError(f"{path} must hold {what}: its 'found' must be null or the violating run (run, seed, mode, "
                         f"violated: {{invariant: count}}, command, run_dir), not {str(found)[:80]}")
    return doc
