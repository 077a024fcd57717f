"""``takeover merge`` of a tuning's shards (``--shard I/N``): the unsharded search walked over the shards'
runs (takeover._internal.tune.shard.replay), and the answer, reports and exit code of a tuning.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from takeover._internal import store
from takeover._internal.sweep.metrics import COLUMNS
from takeover._internal.tune.result import tuning_json
from takeover._internal.tune.shard import RUNS_FILE, copy_runs, plan_of, replay
from takeover.errors import UsageError
from takeover.exit_codes import ExitCode
from takeover.reports.tuning import say, write_tuning_report


def merge_tune(shards: list[dict[str, Any]], out: Path) -> ExitCode:
    """The unsharded search walked over the shards' runs (:func:`takeover._internal.tune.shard.replay`): its runs in
    ``tune.csv`` and their folders, ``tuning.json`` and the reports, the answer and exit code of a tuning."""
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
