"""``takeover merge`` of a hunt's shards (``--shard I/N``): the runs of every shard in run order, the first
violation the violating run with the lowest number, and the summary, lines and exit code the unsharded hunt
gives (it stops at that run).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from takeover._internal import store
from takeover.errors import UsageError
from takeover.exit_codes import ExitCode


def merge_hunt(shards: list[dict[str, Any]], out: Path) -> ExitCode:
    """The runs of every shard in run order; the first violation the violating run with the lowest number,
    the runs after it dropped (the unsharded hunt stops there); kept run folders copied."""
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
