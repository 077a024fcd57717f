"""scripts/analysis-figures: the pages' five-seed table from the runs' summary.json files, as the pages print it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.helpers.processes import REPO

SCRIPT = REPO / "scripts" / "analysis-figures"


def _summary(valid: bool, violations: dict[str, int], tasks: int, duplicated: int, recovery: float | None) -> dict:
    invariants = {
        name: {"valid": name not in violations, "violations": violations.get(name, 0)}
        for name in ("no_stale_commit", "finish_within_lease", "no_lost_task")
    }  # the rest: absent, held
    counts = {"tasks": tasks, "takeovers": 7, "finishes": {"rejected_stale": 2, "rejected_expired": 1}}
    if recovery is not None:
        counts["orphan_recovery_s"] = {"p50": recovery}
    return {
        "valid": valid,
        "exit_code": 0 if valid else 1,
        "invariants": invariants,
        "counts": counts,
        "duplicates": {"tasks": duplicated, "by_cause": {"s5": duplicated, "lost_lease": 0, "other": 0}},
    }


def _figures(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


def test_the_table_counts_each_run_and_the_totals(tmp_path: Path) -> None:
    runs = [_summary(False, {"finish_within_lease": 3}, 350, 7, 0.5), _summary(True, {}, 350, 0, None)]
    for seed, summary in enumerate(runs, start=1):
        (tmp_path / f"lib-{seed}").mkdir()
        (tmp_path / f"lib-{seed}" / "summary.json").write_text(json.dumps(summary))
    (tmp_path / "lib.loads").write_text("1 12.5 14.0 1\n2 14.0 3.9 0\n")
    done = _figures("lib", "--table-only", "--seeds", "1-2", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| 1 ") or line.startswith("| 2 ")]
    assert rows[0].startswith("| 1 | INVALID (1) | ok | 3 | ok |")
    assert "| 7 (7 / 0 / 0) | 20 | 0.5 s | 12.5, 14.0 |" in rows[0]  # duplicates by cause, per 1000, recovery, load
    assert rows[1].startswith("| 2 | VALID (0) | ok | ok |") and "| 3 | 350 |" in rows[1]  # 3 = 2 stale + 1 expired
    assert rows[1].endswith("| - | 14.0, 3.9 |")
    assert (
        "**Caught 1 of 2 runs; 3 violations in all; 7 of 700 tasks with a duplicate side effect = 10.0 per 1000 "
        "tasks.**"
    ) in done.stdout


def test_a_missing_run_or_a_bad_range_is_one_line(tmp_path: Path) -> None:
    missing = _figures("lib", "--table-only", "--seeds", "4", "--out", str(tmp_path))
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1
    assert "lib-4/summary.json is missing" in missing.stderr
    bad = _figures("lib", "--table-only", "--seeds", "5-2")
    assert bad.returncode == 2 and "--seeds must be N or N-M" in bad.stderr
    no_stress = _figures("lib")
    assert no_stress.returncode == 2 and "give the stress arguments after --" in no_stress.stderr
