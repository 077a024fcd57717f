"""``takeover merge``: join the folders of a command's shards (``--shard I/N``) into one result.

A CI matrix of N jobs each runs ``takeover sweep ... --shard I/N --out shard-I``; a last job downloads the
N folders and runs ``takeover merge shard-* --out sweep``: the folder and the answer the unsharded sweep
gives (sweep, hunt, soak, selftest, tune, and the detection bench's bench.json). Exit codes are the merged
command's; 2 when the folders are not the N shards of one command.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from takeover._internal.fanout.merge import read_shards
from takeover.errors import UsageError
from takeover.exit_codes import ExitCode

HELP = "join the output folders of a command's shards (--shard I/N) into the one result the unsharded command gives"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dirs", nargs="+", metavar="OUT_DIR", help="the shards' output folders, one per shard")
    parser.add_argument("--out", required=True, metavar="DIR", help="the merged folder; must be new or empty")


def run(args: argparse.Namespace) -> ExitCode:
    out = Path(args.out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"--out {str(out)!r} exists and is not an empty folder")
    dirs = [Path(d) for d in args.dirs]
    for d in dirs:
        if not d.is_dir():
            raise UsageError(f"merge: {str(d)!r} is not a folder")
    return merge(dirs, out)


def merge(dirs: list[Path], out: Path) -> ExitCode:
    """Merge the shard folders ``dirs`` into ``out`` (new or empty) with the merge of the feature that wrote
    them (each merges its own shards); the exit code the command would give."""
    shards = read_shards(dirs)
    command = shards[0]["command"]
    if command == "hunt":
        from takeover._internal.hunter.merge import merge_hunt

        return merge_hunt(shards, out)
    if command == "soak":
        return _merge_soak(shards, out)
    if command == "selftest":
        from takeover._internal.selftest.merge import merge_selftest

        return merge_selftest(shards, out)
    if command == "tune":
        from takeover._internal.tune.merge import merge_tune

        return merge_tune(shards, out)
    if command == "bench --detection":
        return _merge_detection(shards, out)
    if command != "sweep":
        raise UsageError(f"merge: merging {command} shards is not supported (sweep, hunt, soak, selftest, tune and "
                         "bench --detection are)")  # fmt: skip
    from takeover._internal.sweep.merge import merge_sweep

    return merge_sweep(shards, out)


def _merge_detection(shards: list[dict[str, Any]], out: Path) -> ExitCode:
    """The detection figures from every shard's runs (:func:`takeover.benchmarks.detection_shard.merge_detection`)
    in ``out/bench.json`` as the unsharded ``takeover bench --only detection`` writes it, and its table."""
    import json

    from takeover.benchmarks.bench_file import bench_doc
    from takeover.benchmarks.detection_shard import merge_detection
    from takeover.benchmarks.detection_table import print_detection

    fig = merge_detection(shards, out)
    out.mkdir(parents=True, exist_ok=True)
    doc = {**bench_doc(bool(shards[0]["meta"]["quick"]), [], {}), "detection": fig}
    (out / "bench.json").write_text(json.dumps(doc, indent=2) + "\n")
    made = sum(p["runs"] for p in fig["sharded"]["per_shard"])
    print(f"takeover merge: {len(shards)} shard(s) of a detection bench, {made} run(s) of {len(shards[0]['order'])} "
          f"-> {out / 'bench.json'}", flush=True)  # fmt: skip
    print_detection(fig)
    return ExitCode.VALID


def _merge_soak(shards: list[dict[str, Any]], out: Path) -> ExitCode:
    from takeover._internal.soak.merge import merge_soak
    from takeover.reports.soak import say

    code, summary = merge_soak(shards, out)
    print(f"takeover merge: {len(shards)} shard(s) of a soak, {summary['totals']['segments']} segment(s) and "
          f"{summary['totals']['replays']} replay(s) -> {out}")
    say(out, summary)
    return code
