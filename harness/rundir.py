"""The run folder: where everything a run leaves behind lives (docs/design.md, "The run folder").

Why checks come apart from creation: ``--out`` must be judged (writable? already used?) before
anything starts, so bad input costs nothing; the folder itself is created only once every other
check has passed.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from takeover.errors import UsageError

DEFAULT_BASE = "runs"
LATEST = "latest"
SNAPSHOT_FILE = "snapshot.json"
QUEUE_FILE = "queue.sqlite"


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


def write_json(path: Path, data: Any) -> None:
    """Write then rename: an interrupted write never leaves a half file that looks complete."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)


def write_snapshot(run_dir: Path, rows: list | None, error: str | None = None) -> dict:
    """``snapshot.json`` exactly as docs/history.md pins it."""
    data: dict[str, Any] = {"time": time.time()}
    if error is not None:
        data["error"] = error
    else:
        data["tasks"] = [[str(r[0]), str(r[1]), int(r[2]), None if r[3] is None else float(r[3])] for r in rows]
    tmp = run_dir / f".{SNAPSHOT_FILE}.tmp"
    # Compact: one task per line would be nicer to read but 10k tasks stay small either way.
    tmp.write_text(json.dumps(data, separators=(",", ":")) + "\n")
    os.replace(tmp, run_dir / SNAPSHOT_FILE)
    return data
