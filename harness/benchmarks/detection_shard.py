"""``takeover bench --detection --shard I/N`` and its ``takeover merge``: the detection bench as a CI matrix.

Why this gives the unsharded table: a detection bench is a list of independent runs (planted bug or
reference queue x mode x seed, :func:`takeover.benchmarks.detection.run_order`), each made and judged
alone, and its figures are computed from the judged rows alone, in seed order
(:func:`takeover.benchmarks.detection.figures`). A shard makes runs I, I+N, ... of that list and leaves
their rows (``detection-runs.json``) and ``shard.json`` in its folder; the merge joins every shard's rows
and computes the figures from them as the unsharded bench does: the same cells, caught counts and verdicts.
Only what is timed differs (each run's wall time, and the bench's: the longest shard's, as they ran side by
side). A reference run that raised a false alarm is kept; its folder moves into the shard's folder, and
from there into the merged one, so the evidence survives the CI job that made it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from takeover._internal import store
from takeover.errors import UsageError

COMMAND = "bench --detection"  # shard.json's command
RUNS_FILE = "detection-runs.json"  # a shard's judged rows, its config and timings
RUNS_DIR = "runs"  # kept run folders (a reference queue's false alarm), in a shard's folder and the merged one


def write_detection_shard(out: Path, shard: tuple[int, int], made: dict[str, Any], quick: bool) -> None:
    """Leave shard ``I/N``'s runs (:func:`takeover.benchmarks.detection.make_runs`) in folder ``out``: their
    rows and the bench's config in ``detection-runs.json``, kept run folders under ``runs/``, ``shard.json``."""
    from takeover._internal.fanout.merge import write_shard
    from takeover.benchmarks.detection import run_key, run_order

    out.mkdir(parents=True, exist_ok=True)
    made = {**made, "quick": quick, "rows": [_bring(r, out) for r in made["rows"]]}
    if "runs_dir" in made:
        shutil.rmtree(made.pop("runs_dir"), ignore_errors=True)  # what was kept moved to out/runs
    store.write_json(out / RUNS_FILE, made)
    cfg = made["config"]
    order = [run_key(r) for r in run_order(cfg["bugs"], cfg["seeds"], tuple(cfg["modes"]), cfg["reference"])]
    write_shard(out, COMMAND, shard, order, {**cfg, "quick": quick})


def _bring(row: dict[str, Any], out: Path, src_dir: Path | None = None) -> dict[str, Any]:
    """A row whose run folder was kept, the folder brought to ``out/runs`` and the row pointing there: moved
    from where the run left it, or (``src_dir``: a shard's folder, wherever it was downloaded) copied from
    that folder's ``runs/``."""
    if not row.get("run_dir"):
        return row
    name = Path(row["run_dir"]).name
    src, dest = (src_dir / RUNS_DIR / name if src_dir else Path(row["run_dir"])), out / RUNS_DIR / name
    if src.is_dir():
        dest.parent.mkdir(parents=True, exist_ok=True)
        if src_dir:
            shutil.copytree(src, dest)
        else:
            shutil.move(str(src), dest)
    return {**row, "run_dir": str(dest)}


def merge_detection(shards: list[dict[str, Any]], out: Path) -> dict[str, Any]:
    """The N shards' rows joined (:func:`takeover._internal.fanout.merge.read_shards` checked they are the N shards of
    one run order) into the ``detection`` figures of bench.json, computed as the unsharded bench computes
    them; kept run folders copied to ``out/runs``."""
    from takeover._internal.sweep.runner import shard_of
    from takeover.benchmarks.detection import figures, run_key

    made = []
    for s in shards:
        path = s["dir"] / RUNS_FILE
        if not path.is_file():
            raise UsageError(f"merge: {s['dir']} has no {RUNS_FILE} (the shard did not finish)")
        made.append((s, json.loads(path.read_text())))
    first = shards[0]
    for s, _ in made[1:]:
        if s["meta"] != first["meta"]:
            diff = sorted(k for k in {*s["meta"], *first["meta"]} if s["meta"].get(k) != first["meta"].get(k))
            raise UsageError(f"merge: {s['dir']} is a shard of another detection bench than {first['dir']} "
                             f"(its {', '.join(diff)} differ)")  # fmt: skip
    rows = []
    for s, doc in made:
        expected = shard_of(s["order"], (s["shard"][0], s["shard"][1]))
        have = sorted(run_key((r["queue"], r["mode"], r["seed"])) for r in doc["rows"])
        if have != sorted(expected):
            raise UsageError(f"merge: {s['dir']} holds {len(have)} of its shard's {len(expected)} detection runs "
                             "(the shard did not finish)")  # fmt: skip
        rows += [_bring(r, out, s["dir"]) for r in doc["rows"]]
    docs = [doc for _, doc in made]
    joined = {"config": docs[0]["config"], "jobs": docs[0]["jobs"], "rows": rows,
              "load_avg": {k: [max(vals) for vals in zip(*(d["load_avg"][k] for d in docs), strict=True)]
                           for k in ("before", "after")},
              "elapsed_s": max(d["elapsed_s"] for d in docs),  # the shards ran side by side
              **({"runs_dir": str(out / RUNS_DIR)} if (out / RUNS_DIR).is_dir() else {})}  # fmt: skip
    fig = figures(joined)
    fig["sharded"] = {"shards": len(shards), "per_shard": [
        {"shard": s["shard"][0], "runs": len(doc["rows"]), "jobs": doc["jobs"], "elapsed_s": doc["elapsed_s"],
         "load_avg": doc["load_avg"]} for s, doc in sorted(made, key=lambda sd: sd[0]["shard"][0])]}  # fmt: skip
    return fig
