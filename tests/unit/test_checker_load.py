"""The checker's loading path: column-pruned history reads, and the 1M-event benchmark's generator.

Why these: the memory and speed work reads only the columns the checker uses and builds the
operation frames straight from row numbers; these tests pin that the pruned read is the full read
minus the skipped columns, and that the benchmark measures the history it claims to (a reused
``--dir`` once appended a second run's actions to the first one's ledger).
"""

from __future__ import annotations

import io
import json
import sqlite3

import numpy as np
import pandas as pd

from takeover.benchmarks.check_1m import generate
from takeover.checker.load import HISTORY_COLUMNS, load_run
from takeover.history import COLUMNS, read_history
from takeover.pipeline import check_and_report


def _actions(folder) -> int:
    conn = sqlite3.connect(folder / "ledger.sqlite")
    try:
        return conn.execute("SELECT count(*) FROM actions").fetchone()[0]
    finally:
        conn.close()


def test_generating_twice_into_one_folder_does_not_grow_the_ledger(tmp_path) -> None:
    generate(tmp_path, 3000, 1)
    first = _actions(tmp_path)
    generate(tmp_path, 3000, 1)
    assert _actions(tmp_path) == first > 0


def test_pruned_read_equals_the_full_read_on_the_columns_it_parses(tmp_path) -> None:
    generate(tmp_path, 5000, 2)
    full, _ = read_history(tmp_path / "history.jsonl")
    part, stats = read_history(tmp_path / "history.jsonl", HISTORY_COLUMNS)
    assert list(part.columns) == list(COLUMNS) and stats.lines == len(full)
    for name in COLUMNS:
        if name in HISTORY_COLUMNS:
            left, right = full[name], part[name]
            if isinstance(left.dtype, pd.CategoricalDtype):
                left, right = left.astype(object), right.astype(object)
            pd.testing.assert_series_equal(left, right, check_dtype=False)
        else:
            assert part[name].isna().all(), name


def test_generated_history_checks_valid_with_typed_frames(tmp_path) -> None:
    """A correct queue's generated history (kills, pauses, lost replies) is valid, and the loaded
    ledger and snapshot carry numbers as float64 and text as object, not pandas' string dtype."""
    generate(tmp_path, 20000, 3)
    assert check_and_report(tmp_path, out=io.StringIO(), reports=False).exit_code == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["duplicates"]["tasks"] > 0 and summary["counts"]["uncertain"] > 0
    run = load_run(tmp_path)
    assert run.ledger is not None and run.snapshot is not None
    for frame in (run.ledger, run.snapshot):
        assert frame["task"].dtype == object and frame["gen"].dtype == np.float64
    assert run.ledger["t"].dtype == np.float64 and run.ledger["performed"].dtype == np.int64
