"""The bank of failing seeds: every run that found a violation, kept so it is retried every night.

Why whole configs and not bare seeds: a seed reproduces a run only together with everything else
(profile values, queue, rates, lease). An entry stores the resolved RunConfig as ``config.json``
stores it, so replaying it needs nothing but the bank, even after the profiles were edited.

The file is JSON, one object with an ``entries`` list, rewritten atomically on every change.
Entries are keyed by their config without the run-specific keys (``out``, ``command``, and the
queue's capabilities, which the run found out rather than was told): the same failure found twice
is banked once. An entry stays until a person removes it: a replay that
passes does not prove a race is fixed, only that it did not fire that night.
"""

from __future__ import annotations

import json
import os
import time
from importlib import resources
from pathlib import Path
from typing import Any

from takeover._internal import store
from takeover._internal.config import RunConfig
from takeover._internal.store import DEFAULT_BASE, QUEUE_CAPABILITIES
from takeover.errors import UsageError

BANK_ENV = "TAKEOVER_SEED_BANK"
BANK_FILE = "seed-bank.json"
# takeover's own bank, committed with the package (its reference queue's seeds): replayed, never written.
DEFAULT_BANK = Path(str(resources.files("takeover.workloads").joinpath(BANK_FILE)))
_VOLATILE = ("out", "command", "drain_timeout_effective", QUEUE_CAPABILITIES)


def bank_path(given: str | None, out: str | None = None) -> Path:
    """Where new failures are banked: --seed-bank, else $TAKEOVER_SEED_BANK, else ``seed-bank.json`` in the
    output folder, beside the soak folders (``runs/seed-bank.json`` without ``--out``; ``DIR/seed-bank.json``
    for ``--out DIR/soak``).

    Why beside and not inside the soak folder: each soak gets a new folder, and the bank must outlive it
    to be replayed the next night. Why never the package's own file: an installed package is nobody's to
    write (a read-only site-packages, or a shared one), and a user's failures belong with their runs.
    """
    if given or os.environ.get(BANK_ENV):
        return Path(given or os.environ[BANK_ENV])
    parent = Path(out).parent if out else Path(DEFAULT_BASE)
    return parent / BANK_FILE


def key(config: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in config.items() if k not in _VOLATILE}, sort_keys=True)


def load(path: Path) -> list[dict[str, Any]]:
    """The bank's entries; a missing file is an empty bank, a broken one is bad input (exit 2)."""
    if not path.exists():
        return []
    try:
        data = store.loads_json(path.read_bytes())
        entries = data["entries"]
        for e in entries:
            RunConfig.from_dict(e["config"]).validate()
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"seed bank {str(path)!r} is not valid: {type(exc).__name__}: {exc}") from None
    except UsageError as exc:
        raise UsageError(f"seed bank {str(path)!r} holds a bad config: {exc}") from None
    return list(entries)


def check_writable(path: Path) -> None:
    """Refuse, before the soak starts, a bank that a found failure could not be written to.

    Why up front: a failure is found minutes or hours into a soak; a bank that cannot take it then
    (a read-only cache, a typo'd folder) would lose the one seed the night was for.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.probe")
    try:
        if path.is_dir():
            raise IsADirectoryError(21, "is a folder")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text("")
        tmp.unlink()
        if path.exists() and not os.access(path, os.W_OK):
            raise PermissionError(13, "not writable")
    except OSError as exc:
        raise UsageError(f"seed bank {str(path)!r} cannot be written: {exc.strerror or exc}") from None


def load_all(paths: list[Path]) -> list[dict[str, Any]]:
    """Entries of several banks (the repo's committed one and a CI cache), each failure once."""
    seen: set[str] = set()
    out = []
    for path in dict.fromkeys(p.resolve() for p in paths):
        for e in load(path):
            k = key(e["config"])
            if k not in seen:
                seen.add(k)
                out.append(e)
    return out


def save(path: Path, entries: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"entries": entries}, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def bank(path: Path, config: dict[str, Any], *, violated: list[str], run_dir: str) -> bool:
    """Append a failing run's config unless it is already banked; True when it was added."""
    entries = load(path)
    if any(key(e["config"]) == key(config) for e in entries):
        return False
    entries.append({
        "seed": config.get("seed"),
        "queue": config.get("queue"),
        "violated": violated,
        "found": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "run_dir": run_dir,
        "command": config.get("command"),
        "config": {k: v for k, v in config.items() if k not in _VOLATILE},
    })  # fmt: skip
    save(path, entries)
    return True
