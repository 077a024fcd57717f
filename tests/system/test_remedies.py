"""Each remedy does what it claims, on real runs: kills after the action and lost replies make the
same task's action be requested again, and the service's ledger shows what it did with repeats.

idempotency-key: no task is performed more than once, and every repeat of a performed key is
answered ``deduplicated``. fencing: no action is performed for a generation lower than one already
performed for its task, and every refused request had such a lower generation. Both: the run's
summary and report carry the performed/deduplicated/refused counts, equal to the ledger's.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from tests.helpers.processes import reap_stragglers, takeover

pytestmark = [pytest.mark.timeout(150), pytest.mark.slow]

RUN = ("--profile", "smoke", "--workers", "3", "--tasks", "40", "--duration", "2", "--seed", "11",
       "--kill-after-action-rate", "2.5", "--kill-rate", "0", "--kill-before-action-rate", "0",
       "--kill-during-finish-rate", "0", "--pause-rate", "1", "--lose-reply-rate", "0.15", "--slow-rate", "0.1")


def _run(tmp_path: Path, remedy: str) -> tuple[Path, list[tuple]]:
    run_dir = tmp_path / remedy
    try:
        proc = takeover("stress", *RUN, "--remedy", remedy, "--out", str(run_dir), timeout=120)
    finally:
        reap_stragglers(run_dir)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with sqlite3.connect(run_dir / "ledger.sqlite") as conn:
        rows = conn.execute("SELECT seq, task_id, generation, performed, result, key, remedy FROM actions "
                            "ORDER BY seq").fetchall()
    return run_dir, rows


def _counts_agree(run_dir: Path, rows: list[tuple], remedy: str) -> None:
    summary = json.loads((run_dir / "summary.json").read_text())
    by = Counter(r[4] for r in rows)
    assert summary["remedy"] == {"name": remedy, "performed": by["performed"], "deduplicated": by["deduplicated"],
                                 "refused": by["refused"], "requests": len(rows)}
    report = (run_dir / "report.md").read_text()
    assert (f"remedy {remedy}: performed {by['performed']}, deduplicated {by['deduplicated']}, "
            f"refused {by['refused']}") in report


def test_idempotency_key_performs_each_task_once(tmp_path):
    run_dir, rows = _run(tmp_path, "idempotency-key")
    per_task = defaultdict(list)
    for _seq, task, _gen, performed, result, key, remedy in rows:
        assert remedy == "idempotency-key" and key == task
        per_task[task].append((performed, result))
    repeated = [t for t, rs in per_task.items() if len(rs) > 1]
    assert repeated, "the run produced no repeated request: nothing was tested"
    for task, rs in per_task.items():
        assert sum(p for p, _ in rs) <= 1, f"{task} performed more than once: {rs}"
        first = next((i for i, (p, _) in enumerate(rs) if p), None)
        if first is not None:
            assert all(r == "deduplicated" for _, r in rs[first + 1:]), f"{task}: {rs}"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["duplicates"]["tasks"] == 0 and summary["valid"] is True
    _counts_agree(run_dir, rows, "idempotency-key")


def test_fencing_never_performs_a_lower_generation(tmp_path):
    run_dir, rows = _run(tmp_path, "fencing")
    highest_performed: dict[str, int] = {}
    highest_seen: dict[str, int] = {}
    refused = 0
    for _seq, task, gen, performed, result, _key, _remedy in rows:
        if performed:
            assert gen >= highest_performed.get(task, gen), f"{task}: gen {gen} performed after a higher one"
            highest_performed[task] = max(gen, highest_performed.get(task, gen))
        if result == "refused":
            refused += 1
            assert gen < highest_seen[task], f"{task}: gen {gen} refused without a higher one seen"
        highest_seen[task] = max(gen, highest_seen.get(task, gen))
    assert len(rows) > len(highest_seen), "the run produced no repeated request: nothing was tested"
    _counts_agree(run_dir, rows, "fencing")
    assert json.loads((run_dir / "summary.json").read_text())["valid"] is True
