"""The history writer and reader: the record every checker verdict rests on."""

from __future__ import annotations

import json
import math
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from takeover._internal.history import HistoryWriter, read_history


def test_records_are_json_with_exact_queue_values(tmp_path) -> None:
    path = tmp_path / "h.jsonl"
    w = HistoryWriter(path, 7)
    now = 1796077169.2498415
    w.write("invoke", "claim", worker="w1", now=now, lease=0.3)
    w.write("ok", "claim", worker="w1", task='t"1\\é', gen=3, lease_until=now + 0.3, now=now)
    w.write("ok", "finish", task="t1", gen=2, outcome="done", value=True)
    w.write("info", "action", task="t1", gen=2, error="timeout", value=[1, "x"], phase=None)
    w.write("ok", "x", lease_until=math.nan)
    w.close()
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["process"] for r in recs] == [7] * 5
    assert recs[0]["now"] == now and recs[1]["lease_until"] == now + 0.3  # exact round trip
    assert recs[1]["task"] == 't"1\\é' and recs[1]["gen"] == 3
    assert recs[2]["value"] == "true"  # value is always text
    assert recs[3]["value"] == '[1,"x"]' and "phase" not in recs[3]  # None means absent
    assert recs[4]["lease_until"] is None  # NaN is not JSON
    assert all(abs(r["time"] - recs[0]["time"]) < 5 for r in recs)


def test_what_the_fast_encoder_refuses_is_still_written_whole(tmp_path) -> None:
    """orjson refuses lone surrogates, ints beyond 64 bits and unknown types: the slow path writes them."""
    from pathlib import PurePosixPath

    path = tmp_path / "h.jsonl"
    w = HistoryWriter(path, 3)
    w.write("ok", "claim", task="t\ud800x", gen=1, now=1.5)  # a lone surrogate: not valid UTF-8
    w.write("ok", "claim", task="t2", gen=2**70, now=2.5)  # beyond 64 bits
    w.write("info", "open", error=PurePosixPath("/q.sqlite"), lease_until=math.inf, phase=None)
    w.write("ok", "claim", task="t3", gen=3, now=3.5)  # and the fast path goes on after them
    w.close()
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(recs) == 4 and [r["process"] for r in recs] == [3] * 4
    assert recs[0]["task"] == "t\ud800x" and recs[1]["gen"] == 2**70
    assert recs[2]["error"] == "/q.sqlite" and recs[2]["lease_until"] is None and "phase" not in recs[2]
    frame, stats = read_history(path)  # pyarrow refuses the surrogate: the line-by-line path keeps it
    assert stats.lines == 4 and stats.corrupt_lines == 0
    tasks = frame["task"].astype(object)
    assert tasks[0] == "t\\ud800x" and tasks[1] == "t2" and tasks.isna()[2] and tasks[3] == "t3"


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(
    task=st.text(min_size=1, max_size=12),
    gen=st.integers(min_value=0, max_value=2**40),
    now=st.floats(min_value=0, max_value=4e9, allow_nan=False),
)
def test_any_task_id_and_number_survive_the_columnar_reader(tmp_path_factory, task, gen, now) -> None:
    path = tmp_path_factory.mktemp("h") / "h.jsonl"
    w = HistoryWriter(path, 1)
    w.write("ok", "claim", task=task, gen=gen, now=now, lease_until=now + 1.0)
    w.close()
    frame, stats = read_history(path)
    assert stats.lines == 1 and not stats.torn_tail
    row = frame.iloc[0]
    assert row["task"] == task and row["gen"] == gen and row["now"] == now and row["lease_until"] == now + 1.0


def test_a_torn_last_line_is_dropped_and_reported(tmp_path) -> None:
    path = tmp_path / "h.jsonl"
    w = HistoryWriter(path, 1)
    w.write("invoke", "claim", now=1.0, lease=1.0)
    w.close()
    with open(path, "ab") as fh:
        fh.write(b'{"time":2.0,"process":1,"type":"ok","f":"cla')
    frame, stats = read_history(path)
    assert len(frame) == 1 and stats.torn_tail


def test_a_corrupt_line_in_the_middle_is_skipped_and_counted(tmp_path) -> None:
    path = tmp_path / "h.jsonl"
    w = HistoryWriter(path, 1)
    w.write("invoke", "claim", now=1.0, lease=1.0)
    os.write(os.open(path, os.O_WRONLY | os.O_APPEND), b"garbage\n")
    w.write("fail", "claim", error="empty")
    w.close()
    frame, stats = read_history(path)
    assert len(frame) == 2 and stats.corrupt_lines == 1
    assert list(frame["type"]) == ["invoke", "fail"]
