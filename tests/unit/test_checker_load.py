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
import pytest

from takeover._internal.checker.load import HISTORY_COLUMNS, load_run
from takeover._internal.history import COLUMNS, read_history
from takeover._internal.pipeline import check_and_report
from takeover.benchmarks.check_1m import generate


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


def test_the_ledger_read_in_chunks_is_the_ledger_read_at_once(tmp_path, monkeypatch) -> None:
    """Chunk boundaries change nothing: the same frame whether the rows come 7 at a time or all at once,
    with the odd values a ledger may hold (a missing process, every kind of reply and result, a text where
    a generation belongs: NaN either way) placed in different chunks."""
    from takeover._internal.checker import load

    generate(tmp_path, 3000, 4)
    conn = sqlite3.connect(tmp_path / "ledger.sqlite")
    conn.execute("UPDATE actions SET process = NULL WHERE seq % 5 = 0")
    conn.execute("UPDATE actions SET reply = 'error' WHERE seq % 9 = 0")
    conn.execute("UPDATE actions SET result = 'deduplicated' WHERE seq = 3")
    conn.execute("UPDATE actions SET generation = 'two' WHERE seq = 11")
    conn.commit()
    conn.close()
    frames = []
    monkeypatch.setattr(load, "_arrow_ledger", lambda *args: None)  # the row-by-row reader, in chunks
    for chunk in (7, 10**9):
        monkeypatch.setattr(load, "_LEDGER_CHUNK", chunk)
        frames.append(load._load_ledger(tmp_path / "ledger.sqlite", []))
    assert len(frames[0]) > 7 * 3
    pd.testing.assert_frame_equal(frames[0], frames[1])
    assert np.isnan(frames[0]["process"]).sum() > 0 and np.isnan(frames[0]["gen"]).sum() == 1
    assert set(frames[0]["reply"]) == {"ok", "lost", "error"} and "deduplicated" in set(frames[0]["result"])


@pytest.mark.parametrize(
    ("change", "by_arrow"),
    [
        ("UPDATE actions SET process = NULL WHERE seq % 5 = 0", True),
        # Missing before the driver's first rows end, then numbers: the driver's type of the column comes late.
        ("UPDATE actions SET process = NULL WHERE seq < 1500", True),
        ("UPDATE actions SET reply = 'error' WHERE seq % 9 = 0", True),
        # No rows: the driver types every column as a number, the text ones too; the rows decide.
        ("DELETE FROM actions", False),
        # What takeover never writes: the driver refuses a column whose type changes, the rows decide.
        ("UPDATE actions SET generation = 'two' WHERE seq = 2900", False),
        ("UPDATE actions SET generation = 2.5 WHERE seq = 2900", False),
        ("UPDATE actions SET task_id = X'7431' WHERE seq = 1", False),
    ],
    ids=["null-process", "null-first", "replies", "empty", "text-gen", "real-gen", "blob-task"],
)
def test_the_ledger_read_as_arrow_columns_is_the_ledger_read_row_by_row(tmp_path, monkeypatch, change, by_arrow):
    """The ledger's Arrow read (SQLite's ADBC driver) gives exactly the frame the row-by-row read gives, and
    hands anything but what takeover's ledger holds back to the row-by-row read."""
    # No importorskip: the driver is a dependency (pyproject.toml), and without it the by_arrow cases fail.
    from takeover._internal.checker import load

    generate(tmp_path, 25000, 5)  # ~3000 actions: beyond the driver's first batch of rows
    path = tmp_path / "ledger.sqlite"
    conn = sqlite3.connect(path)
    conn.execute(change)
    conn.commit()
    conn.close()
    uri = f"file:{path}?mode=ro"
    query = f"SELECT {', '.join(load.LEDGER_COLUMNS)} FROM actions ORDER BY seq"
    assert (load._arrow_ledger(uri, query, list(load.LEDGER_COLUMNS)) is not None) == by_arrow
    fast = load._load_ledger(path, [])
    monkeypatch.setattr(load, "_arrow_ledger", lambda *args: None)
    slow = load._load_ledger(path, [])
    assert fast is not None and slow is not None
    pd.testing.assert_frame_equal(fast, slow, check_exact=True)
