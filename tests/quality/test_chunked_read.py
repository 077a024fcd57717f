"""The history read a few MB at a time gives the frame, and the verdicts, of the history read whole.

Why: the checker parses its history in chunks (takeover._internal.history._chunks) and builds the frame as they come
(takeover._internal.history._Frame), to keep a 1M-event check's memory down. A chunk boundary must change nothing:
not a value, not a type, not the order of a categorical's categories (the checker uses the task column's
category codes as task codes). Here every known-verdict case (together: every kind of record and every
column) is read with chunks of one line, of a few lines and whole, against pyarrow's own whole-file
conversion, and the cases that together hold every kind of record are checked again with one-line chunks.
"""

from __future__ import annotations

import io
import json

import pandas as pd
import pyarrow.json as paj
import pytest

from takeover._internal import history
from takeover._internal.checker.load import HISTORY_COLUMNS
from takeover._internal.pipeline import check_and_report
from tests.quality.cases import CASES


def _every_case(tmp_path) -> bytes:
    """All cases' histories, one after the other, with the odd lines a history may hold besides: a record
    without ``process`` (the int column becomes float with NaN), one with every key, a text no case has
    until the last lines, a line longer than any chunk below, and lines only the slower parse reads."""
    parts = [(CASES[name][0]().write(tmp_path / name) / "history.jsonl").read_bytes() for name in sorted(CASES)]
    every = {
        name: (1.5 if kind == "float64" else 3 if kind == "int64" else f"{name}-é")
        for name, kind in history.COLUMNS.items()
    }
    odd = [
        json.dumps({"time": 1.0, "type": "ok", "f": "claim", "task": "no-process"}),
        json.dumps(every),
        json.dumps({**every, "detail": "x" * 5000}),
        json.dumps({"time": 2.0, "process": 0, "type": "invoke", "f": "never-seen-before"}),
        # Read by pyarrow's parser only with every column's type given: a text that looks like a time, and a
        # key the checker does not read whose values change type.
        json.dumps({"time": 3.0, "process": 0, "type": "ok", "f": "run", "value": "2026-12-03 20:00:00"}),
        json.dumps({"time": 4.0, "process": 0, "type": "ok", "f": "run", "extra": 1}),
        json.dumps({"time": 5.0, "process": 0, "type": "ok", "f": "run", "extra": "one"}),
    ]
    return b"".join(parts) + ("\n".join(odd) + "\n").encode()


def _whole(path, columns) -> pd.DataFrame:
    """pyarrow's conversion of the whole file at once: what the checker read before it read in chunks."""
    table = paj.read_json(
        path,
        parse_options=paj.ParseOptions(explicit_schema=history._schema(columns), unexpected_field_behavior="ignore"),
    )
    return table.to_pandas(strings_to_categorical=True)


@pytest.mark.parametrize(
    ("columns", "chunk"),
    [(HISTORY_COLUMNS, 1), (HISTORY_COLUMNS, 700), (None, 700), (HISTORY_COLUMNS, 1 << 24)],
    ids=["lines", "few", "all-columns", "whole"],
)
def test_the_history_read_in_chunks_is_the_history_read_whole(tmp_path, monkeypatch, chunk, columns) -> None:
    path = tmp_path / "history.jsonl"
    path.write_bytes(_every_case(tmp_path))
    monkeypatch.setattr(history, "_CHUNK", chunk)
    frame, stats = history.read_history(path, columns)
    whole = _whole(path, columns)
    assert stats.lines == len(whole) > 1000 and stats.corrupt_lines == 0
    assert list(frame.columns) == list(history.COLUMNS)
    assert frame["process"].dtype == "float64" and frame["task"].cat.categories[0] == whole["task"].iloc[0]
    pd.testing.assert_frame_equal(frame[list(whole.columns)], whole, check_exact=True)


def _covering_cases() -> list[str]:
    """The fewest cases (greedily) whose records hold every (kind of record, key) pair any case holds: a
    dozen of the 60, so the test checks each kind of record without checking every case twice."""
    have = {name: {(r["f"], key) for r in CASES[name][0]().records for key in r} for name in sorted(CASES)}
    left, picked = set().union(*have.values()), []
    while left:
        best = max(have, key=lambda name: len(have[name] & left))
        picked.append(best)
        left -= have[best]
    return picked


def test_cases_of_every_kind_of_record_have_the_same_summary_read_one_line_at_a_time(tmp_path, monkeypatch) -> None:
    def summary(folder) -> dict:
        check_and_report(folder, out=io.StringIO(), reports=False)
        got = json.loads((folder / "summary.json").read_text())
        got.pop("check_seconds")
        got.pop("run_dir")
        return got

    names = _covering_cases()
    assert any(CASES[name][1] for name in names) and any(not CASES[name][1] for name in names)
    whole = {name: summary(CASES[name][0]().write(tmp_path / "whole" / name)) for name in names}
    monkeypatch.setattr(history, "_CHUNK", 1)
    for name in names:
        assert summary(CASES[name][0]().write(tmp_path / "lines" / name)) == whole[name], name


def test_task_codes_past_each_integer_width_survive_the_chunks(tmp_path, monkeypatch) -> None:
    """More distinct tasks than an int8 and then an int16 code can number, arriving chunk by chunk: each
    chunk's codes are kept in the narrowest type that holds the categories so far, and joined wider."""
    path = tmp_path / "history.jsonl"
    path.write_text(
        "".join(f'{{"time":{i},"process":1,"type":"ok","f":"claim","task":"t{i % 33000}"}}\n' for i in range(40000))
    )
    monkeypatch.setattr(history, "_CHUNK", 1 << 16)
    frame, _ = history.read_history(path, HISTORY_COLUMNS)
    whole = _whole(path, HISTORY_COLUMNS)
    assert len(whole["task"].cat.categories) == 33000
    pd.testing.assert_frame_equal(frame[list(whole.columns)], whole, check_exact=True)
