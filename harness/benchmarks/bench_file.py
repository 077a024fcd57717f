"""bench.json, the file ``takeover bench`` writes: its head (the run's size, when, on what machine, the
targets' rows and the measurements behind them), and what a run keeps from the file already there."""

from __future__ import annotations

import json
import os
import platform
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any


def bench_doc(quick: bool, results: list[dict[str, Any]], figures: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """bench.json's head: the run's size, when, where, the targets' rows and the measurements behind them."""
    return {"quick": quick, "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "machine": machine(),
            "commit": head_commit(), "results": results, "measurements": figures}  # fmt: skip


def keep_earlier(out: Path, doc: dict[str, Any]) -> list[str]:
    """Carry into ``doc`` what the bench.json already at ``out`` holds and this run did not measure: a
    ``--only bridge_vs_native`` run must not throw away the detection figures of an hour-long run, nor the
    other targets' rows. Rows (``results``) and ``measurements`` are kept by name, sections (``detection``,
    ``mutation``, ...) by key; ``kept_from`` says which and when they were measured. A file that is not a
    bench.json, or another database's bench.json, is replaced as before. Returns what was kept."""
    try:
        old = json.loads(out.read_text())
    except (OSError, ValueError):
        return []
    if not isinstance(old, dict) or not isinstance(old.get("results"), list) or "measurements" not in old:
        return []
    if old.get("db") != doc.get("db"):  # another database's figures are not this one's: replaced, not mixed
        return []
    kept: list[str] = []
    measured = {row["name"] for row in doc["results"]}
    for row in old["results"]:
        if isinstance(row, dict) and row.get("name") not in measured:
            doc["results"].append(row)
            kept.append(str(row.get("name")))
    for source, figures in (old.get("measurements") or {}).items():
        if source not in doc["measurements"]:
            doc["measurements"][source] = figures
            if source not in kept:
                kept.append(source)
    for key, value in old.items():
        if key not in doc and key != "kept_from":
            doc[key] = value
            kept.append(key)
    if kept:
        earlier = dict(old.get("kept_from") or {})
        doc["kept_from"] = {**{k: v for k, v in earlier.items() if k in kept}, **{k: old.get("when") for k in kept
                                                                                    if k not in earlier}}
    return kept


def machine() -> dict[str, Any]:
    """Enough to know whether two bench.json files are comparable."""
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "platform": platform.platform(),
        "load_avg": [round(x, 2) for x in os.getloadavg()],
    }


def head_commit() -> str | None:
    """The commit of the checkout takeover runs from (an editable install: the repository's HEAD), or None
    outside a git checkout: bench.json's ``commit``, which the suite's log is compared with."""
    repo = Path(__file__).resolve().parents[2]  # harness/benchmarks/bench_file.py -> the checkout
    if not (repo / "pyproject.toml").is_file() or not (repo / "harness").is_dir():
        return None  # installed from a wheel: no checkout here (and a git repository above is not takeover's)
    try:
        done = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, check=False)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.strip() or None
