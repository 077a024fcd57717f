"""HistoryWriter against docs/history.md, case by case, read back by json and by the pyarrow reader."""

from __future__ import annotations

import enum
import json
import math

from takeover._internal.history import HistoryWriter, read_history


class Resolution(enum.StrEnum):
    """A str subclass, as a caller's own vocabulary type would be."""

    DONE = "done"


class Text(str):
    pass


def _records(path) -> list[dict]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def test_a_str_subclass_value_is_the_text_itself_not_its_json(tmp_path) -> None:
    """``value`` is always text: a str (of any class) is that text, never quoted again."""
    path = tmp_path / "h.jsonl"
    w = HistoryWriter(path, 0)
    w.write("ok", "resolve", task="t1", gen=1, value=Resolution.DONE)
    w.write("ok", "action", task="t2", gen=1, value=Text("ok"))
    w.write("ok", "action", task="t3\ud800", gen=1, value=Text("deduplicated"))  # the slow path too
    w.close()
    assert [r["value"] for r in _records(path)] == ["done", "ok", "deduplicated"]
    frame, stats = read_history(path)
    assert stats.corrupt_lines == 0
    assert list(frame["value"].astype(object)) == ["done", "ok", "deduplicated"]


def test_the_documented_cases_survive_both_readers(tmp_path) -> None:
    path = tmp_path / "h.jsonl"
    now = 1733000000.123456789
    until = 0.1 + 0.2
    long_task = "é" * 300_000 + "x"
    w = HistoryWriter(path, 4)
    w.write("ok", "claim", task="tâche-日本-😀", gen=2, now=now, lease_until=until, error=None)
    w.write("ok", "claim", task=long_task, gen=3, now=math.nan, lease_until=math.inf)
    w.write("ok", "finish", task="t4", gen=4, outcome="done", value=True)
    w.write("ok", "exit", target=3, value=-9)
    w.close()
    recs = _records(path)
    assert len(path.read_bytes().splitlines()) == 4
    assert "error" not in recs[0] and recs[0]["now"] == now and recs[0]["lease_until"] == until
    assert recs[1]["task"] == long_task and recs[1]["now"] is None and recs[1]["lease_until"] is None
    assert recs[2]["value"] == "true" and recs[3]["value"] == "-9"
    frame, stats = read_history(path)
    assert stats.lines == 4 and stats.corrupt_lines == 0
    assert list(frame["task"].astype(object)[:2]) == ["tâche-日本-😀", long_task]
    assert frame["now"][0] == now and frame["lease_until"][0] == until
    assert math.isnan(frame["now"][1]) and math.isnan(frame["lease_until"][1])
    assert list(frame["value"].astype(object)[2:]) == ["true", "-9"]
