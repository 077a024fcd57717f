"""``takeover merge`` of a sweep's shards (``--shard I/N``): one sweep.csv of every cell's runs, their
folders, and the recommendation the unsharded sweep gives.
"""

from __future__ import annotations

import csv
import shutil
from pathlib import Path
from typing import Any

from takeover._internal import store
from takeover._internal.sweep.conclude import conclude
from takeover._internal.sweep.metrics import COLUMNS
from takeover.exit_codes import ExitCode


def merge_sweep(shards: list[dict[str, Any]], out: Path) -> ExitCode:
    """The shards' rows in the unsharded order and their run folders in ``out``, then the recommendation,
    reports, lines and exit code of the unsharded sweep (:func:`takeover._internal.sweep.conclude.conclude`)."""
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
    return conclude(out, meta, rows, violations)
