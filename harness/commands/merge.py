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

from takeover import store
from takeover.errors import UsageError
from takeover.exit_codes import ExitCode
from takeover.fanout.merge import read_shards

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
    """Merge the shard folders ``dirs`` into ``out`` (new or empty); the exit code the command would give."""
    shards = read_shards(dirs)
    command = shards[0]["command"]
    if command == "hunt":
        return _merge_hunt(shards, out)
    if command == "soak":
        return _merge_soak(shards, out)
    if command == "selftest":
        from takeover.selftest.merge import merge_selftest

        return merge_selftest(shards, out)
    if command == "tune":
        return _merge_tune(shards, out)
    if command == "bench --detection":
        return _merge_detection(shards, out)
    if command != "sweep":
        raise UsageError(f"merge: merging {command} shards is not supported (sweep, hunt, soak, selftest, tune and "
                         "bench --detection are)")  # fmt: skip
    return _merge_sweep(shards, out)


def _merge_detection(shards: list[dict[str, Any]], out: Path) -> ExitCode:
    """The detection figures from every shard's runs (:func:`takeover.benchmarks.detection_shard.merge_detection`)
    in ``out/bench.json`` as the unsharded ``takeover bench --only detection`` writes it, and its table."""
    import json

    from takeover.benchmarks.detection_shard import merge_detection
    from takeover.commands.bench import bench_doc, print_detection

    fig = merge_detection(shards, out)
    out.mkdir(parents=True, exist_ok=True)
    doc = {**bench_doc(bool(shards[0]["meta"]["quick"]), [], {}), "detection": fig}
    (out / "bench.json").write_text(json.dumps(doc, indent=2) + "\n")
    made = sum(p["runs"] for p in fig["sharded"]["per_shard"])
    print(f"takeover merge: {len(shards)} shard(s) of a detection bench, {made} run(s) of {len(shards[0]['order'])} "
          f"-> {out / 'bench.json'}", flush=True)  # fmt: skip
    print_detection(fig)
    return ExitCode.VALID


def _merge_tune(shards: list[dict[str, Any]], out: Path) -> ExitCode:
    """The unsharded search walked over the shards' runs (:func:`takeover.tune.shard.replay`): its runs in
    ``tune.csv`` and their folders, ``tuning.json`` and the reports, the answer and exit code of a tuning."""
    import csv

    from takeover.commands.tune import say
    from takeover.reports.tuning import write_tuning_report
    from takeover.sweep.metrics import COLUMNS
    from takeover.tune.result import tuning_json
    from takeover.tune.shard import RUNS_FILE, copy_runs, plan_of, replay

    made, sources = [], {}
    for s in shards:
        path = s["dir"] / RUNS_FILE
        if not path.is_file():
            raise UsageError(f"merge: {s['dir']} has no {RUNS_FILE} (the shard did not finish)")
        for m in store.read_json_object(path, "a tuning shard's runs", keys={"runs": list})["runs"]:
            made.append(m)
            sources[Path(str(m["row"]["run_dir"])).name] = s["dir"] / store.SWEEP_CELLS
    meta = shards[0]["meta"]
    plan = plan_of(meta, out)
    tuning = replay(plan, out, made)
    copy_runs(tuning, sources, out)
    with open(out / store.TUNE_CSV, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(tuning.rows)
    interrupted = any(s["meta"].get("stopped") == "interrupted" for s in shards)
    elapsed = max(float(s["meta"].get("elapsed_s", 0.0)) for s in shards)  # the shards ran side by side
    data = tuning_json(tuning, command=meta["command"], interrupted=interrupted, elapsed_s=elapsed)
    data["task_times"]["file"] = meta["plan"]["spec"]  # the user's file, as the unsharded tuning names it
    data["sharded"] = {"shards": len(shards), "runs_made": len(made), "runs_read": len(tuning.rows),
                       "left_out": "the remedy runs and the scale check (they stand at the answer, which no shard "
                                   "knew)"}  # fmt: skip
    store.write_json(out / store.TUNE_JSON, data)
    write_tuning_report(out, data)
    print(f"takeover merge: {len(shards)} shard(s) of a tuning, the search walked over {len(tuning.rows)} of their "
          f"{len(made)} run(s) -> {out}")  # fmt: skip
    say(data)
    if data["violations"]:
        return ExitCode.VIOLATED
    return ExitCode.VALID if data["resolved"] else ExitCode.INCONCLUSIVE


def _merge_soak(shards: list[dict[str, Any]], out: Path) -> ExitCode:
    from takeover.commands.soak import report
    from takeover.soak.merge import merge_soak

    code, summary = merge_soak(shards, out)
    print(f"takeover merge: {len(shards)} shard(s) of a soak, {summary['totals']['segments']} segment(s) and "
          f"{summary['totals']['replays']} replay(s) -> {out}")
    report(out, summary)
    return code


def _merge_hunt(shards: list[dict[str, Any]], out: Path) -> ExitCode:
    """The runs of every shard in run order; the first violation the violating run with the lowest number,
    the runs after it dropped (the unsharded hunt stops there); kept run folders copied."""
    import shutil

    docs = [(s["dir"], store.read_hunt_summary(s["dir"])) for s in shards]
    missing = [str(d) for d, doc in docs if doc is None]
    if missing:
        raise UsageError(f"merge: {missing[0]} has no {store.HUNT_FILE}")
    rows = sorted(((d, r) for d, doc in docs if doc for r in doc["runs"]), key=lambda dr: dr[1]["run"])
    first = next((r for _, r in rows if r["verdict"] == "violated"), None)
    if first is not None:
        rows = [(d, r) for d, r in rows if r["run"] <= first["run"]]
    out.mkdir(parents=True, exist_ok=True)
    runs = []
    for src, r in rows:
        folder = Path(r["run_dir"]).name
        if r.get("kept") and (src / folder).is_dir():
            shutil.copytree(src / folder, out / folder)
        runs.append({**r, "run_dir": str(out / folder)})
    found = None
    for _, doc in docs:
        if first is not None and doc and doc.get("found") and doc["found"]["run"] == first["run"]:
            found = {**doc["found"], "run_dir": str(out / Path(doc["found"]["run_dir"]).name)}
    statuses = {doc["status"] for _, doc in docs if doc}
    code = (ExitCode.VIOLATED if found else ExitCode.INTERRUPTED if "interrupted" in statuses
            else ExitCode.INCONCLUSIVE if not runs or any(r["verdict"] != "valid" for r in runs) else ExitCode.VALID)
    verdict = "invalid" if found else "valid" if code == ExitCode.VALID else "inconclusive"
    meta = shards[0]["meta"]
    summary = {**meta, "status": "interrupted" if "interrupted" in statuses else "finished", "verdict": verdict,
               "exit_code": int(code), "elapsed_s": max(float(doc.get("elapsed_s", 0)) for _, doc in docs if doc),
               "runs": runs, "found": found, "shards": len(shards)}  # fmt: skip
    store.write_hunt_summary(out, summary)
    print(f"takeover merge: {len(shards)} shard(s) of a hunt, {len(runs)} run(s) -> {out}")
    if found:
        print(f"hunt: VIOLATION, first at run {found['run']} (seed {found['seed']}, {found['mode']}): "
              + ", ".join(found["violated"]))
        print(f"reproduce with: {found['command']}")
    else:
        print(f"hunt: no violation in {len(runs)} run(s); verdict {verdict}")
    print(f"hunt summary: {out / store.HUNT_FILE}")
    return code


def _merge_sweep(shards: list[dict[str, Any]], out: Path) -> ExitCode:
    import csv
    import shutil

    from takeover.commands.sweep import report
    from takeover.sweep.metrics import COLUMNS

    order = {key: i for i, key in enumerate(shards[0]["order"])}
    rows: list[dict[str, Any]] = []
    out.mkdir(parents=True, exist_ok=True)
    for s in shards:
        src: Path = s["dir"]
        with open(src / store.SWEEP_CSV, newline="") as fh:
            for row in csv.DictReader(fh):
                moved = out / store.SWEEP_CELLS / Path(row["run_dir"]).name
                shutil.copytree(src / store.SWEEP_CELLS / moved.name, moved)
                rows.append({**row, "run_dir": str(moved)})
    rows.sort(key=lambda r: order[f"{r['cell']}-s{r['seed']}"])
    shutil.copy(shards[0]["dir"] / store.SWEEP_GRID, out / store.SWEEP_GRID)
    with open(out / store.SWEEP_CSV, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    meta = {**shards[0]["meta"], "planned": len(order),
            "interrupted": any(s["meta"].get("interrupted") for s in shards)}  # fmt: skip
    violations = [r for r in rows if r["valid"] == "False"]
    print(f"takeover merge: {len(shards)} shard(s) of sweep {meta['grid']}, {len(rows)} run(s) of {len(order)} "
          f"-> {out}", flush=True)  # fmt: skip
    return report(out, meta, rows, violations)
