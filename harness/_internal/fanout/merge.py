"""What a shard of a command leaves (``shard.json``), and the check that folders are the N shards of one command.

Why this works: a shard is a plain subset of the command's runs (run i is in shard i mod N + 1,
:func:`takeover._internal.sweep.runner.shard_of`), each made exactly as the unsharded command makes it, and the
command's answer is computed from the gathered runs alone. So the merge copies every shard's run folders
into one folder, puts the rows back in the command's own run order, and computes the answer again the
way the command does. Each shard leaves ``shard.json`` (which shard of how many, the command's run order
and what its report needs), so a missing, repeated or foreign shard is found before anything is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from takeover._internal import store
from takeover.errors import UsageError

SHARD_FILE = "shard.json"


def write_shard(out: Path, command: str, shard: tuple[int, int], order: list[str], meta: dict[str, Any]) -> None:
    """``shard.json``: this folder is shard I of N of ``command`` whose runs, in order, are ``order``."""
    store.write_json(out / SHARD_FILE, {"command": command, "shard": list(shard), "order": order, "meta": meta})


def read_shards(dirs: list[Path]) -> list[dict[str, Any]]:
    """Every folder's ``shard.json``, checked to be the N different shards of one command."""
    shards = []
    for d in dirs:
        path = d / SHARD_FILE
        if not path.is_file():
            raise UsageError(f"merge: {d} is not a shard's folder (no {SHARD_FILE}; run the command with --shard I/N)")
        shards.append({**_read_shard(path), "dir": d})
    first = shards[0]
    for s in shards[1:]:
        if s["command"] != first["command"] or s["order"] != first["order"] or s["shard"][1] != first["shard"][1]:
            raise UsageError(f"merge: {s['dir']} is a shard of another {s['command']} than {first['dir']} "
                             "(another grid, seeds or shard count)")  # fmt: skip
    count = first["shard"][1]
    have = sorted(s["shard"][0] for s in shards)
    if have != list(range(1, count + 1)):
        missing = sorted(set(range(1, count + 1)) - set(have))
        repeated = sorted({i for i in have if have.count(i) > 1})
        raise UsageError(f"merge: the folders are shards {have} of {count}: "
                         + "; ".join([*([f"missing {missing}"] if missing else []),
                                      *([f"repeated {repeated}"] if repeated else [])]))  # fmt: skip
    return shards


def _read_shard(path: Path) -> dict[str, Any]:
    """One ``shard.json``, its shape checked: a damaged file (cut short, edited, another tool's) is one line."""
    what = "a shard's record (command, shard [I, N], order, meta)"
    doc = store.read_json_object(path, what, keys={"command": str, "shard": list, "order": list, "meta": dict})
    shard = doc["shard"]
    if len(shard) != 2 or not all(type(n) is int for n in shard) or not 1 <= shard[0] <= shard[1]:
        raise UsageError(f"{path} must hold {what}: its 'shard' must be [I, N] with 1 <= I <= N, not {shard!r}")
    if not all(isinstance(key, str) for key in doc["order"]):
        raise UsageError(f"{path} must hold {what}: its 'order' must be a list of texts")
    return doc
