"""``takeover merge`` of a selftest's shards (``--shard I/N``): the planted bugs in the unsharded order, the
reference seeds in order, every run folder copied, and the verdict and lines the unsharded selftest gives.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from takeover._internal import store
from takeover._internal.selftest.runs import RESULT_FILE
from takeover._internal.selftest.verdict import conclude, passed, ref_line, row_line
from takeover.errors import UsageError
from takeover.exit_codes import ExitCode


def merge_selftest(shards: list[dict[str, Any]], out: Path) -> ExitCode:
    """The planted bugs in the unsharded order, the reference seeds in order, every run folder copied; the
    verdict from them all (:func:`takeover._internal.selftest.verdict.passed`)."""
    place = {name: i for i, name in enumerate(shards[0]["order"])}
    results, refs = [], []
    out.mkdir(parents=True, exist_ok=True)
    for s in shards:
        path = s["dir"] / RESULT_FILE
        if not path.is_file():
            raise UsageError(f"merge: {s['dir']} has no {RESULT_FILE} (the shard did not finish)")
        doc = store.read_json_object(path, "a selftest shard's result", keys={"planted": list, "reference": list})
        for run in sorted(p for p in s["dir"].iterdir() if p.is_dir()):
            shutil.copytree(run, out / run.name)
        for row in doc["planted"]:
            results.append({**row, **({"run_dir": str(out / Path(row["run_dir"]).name)} if "run_dir" in row else {})})
        refs += doc["reference"]
    results.sort(key=lambda r: place[r["queue"]])
    refs.sort(key=lambda r: r["seed"])
    merged = {"ok": passed(results, refs), "profile": shards[0]["meta"]["profile"],
              "duration": shards[0]["meta"]["duration"], "planted": results, "reference": refs, "runs": str(out),
              "shards": len(shards)}  # fmt: skip
    store.write_json(out / RESULT_FILE, merged)
    print(f"takeover merge: {len(shards)} shard(s) of a selftest, {len(results)} planted bug(s) and {len(refs)} "
          f"reference seed(s) -> {out}")  # fmt: skip
    for line in [*map(row_line, results), *map(ref_line, refs)]:
        print(line)
    return conclude(merged, as_json=False)
