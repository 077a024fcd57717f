"""Observed task durations from a file (takeover._internal.task_times) and their resampling by the workers."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from takeover._internal.config import TaskTime
from takeover._internal.sweep.model import quantile, survival
from takeover._internal.task_times import MAX_SAMPLES, SUMMARY_POINTS, load_task_times, parse_task_times
from takeover.errors import UsageError
from takeover.workloads.worker import draw_task_time


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_a_json_list_is_kept_as_raw_samples_sorted():
    t = parse_task_times("[3, 1.5, 0, 40]", "f")
    assert (t.samples, t.source, t.n_read, t.max) == ((0.0, 1.5, 3.0, 40.0), "samples", 4, 40.0)


@pytest.mark.parametrize(("text", "column"), [
    ("0.5\n1\n2\n", None),  # one column, no header
    ("seconds\n0.5\n1\n2\n", None),  # one column with a header
    ("id,duration_s,queue\n7,0.5,a\n8,1,b\n9,2,c\n", None),  # the column named like a duration
    ("id,took,queue\n7,0.5,a\n8,1,b\n9,2,c\n", "took"),  # FILE:COLUMN
])  # fmt: skip
def test_a_csv_column_is_read(tmp_path: Path, text: str, column: str | None):
    spec = _write(tmp_path, "t.csv", text) + (f":{column}" if column else "")
    assert load_task_times(spec).samples == (0.5, 1.0, 2.0)


def test_a_percentile_summary_is_expanded_to_quantiles_that_keep_its_points_and_its_tail():
    t = parse_task_times('{"p50": 2, "p90": 5, "p99": 40, "max": 120}', "f")
    assert t.source == "summary" and len(t.samples) == SUMMARY_POINTS
    assert t.max == 120.0  # the longest task stays in the draw
    assert t.quantile(0.5) == pytest.approx(2, rel=0.01)
    assert t.quantile(0.9) == pytest.approx(5, rel=0.01)
    assert t.quantile(0.99) == pytest.approx(40, rel=0.05)
    assert 0 < t.samples[0] < 2  # below the median: the first segment's slope, not zero
    csv = parse_task_times("percentile,seconds\np50,2\np90,5\np99,40\nmax,120\n", "f")
    assert csv.samples == t.samples, "a summary table in CSV is the same summary"


def test_more_samples_than_kept_are_thinned_keeping_the_shortest_and_the_longest():
    values = [float(i) for i in range(3 * MAX_SAMPLES)]
    t = parse_task_times("[" + ",".join(map(str, values)) + "]", "f")
    assert len(t.samples) == MAX_SAMPLES and t.n_read == 3 * MAX_SAMPLES
    assert (t.samples[0], t.samples[-1]) == (0.0, values[-1])
    assert t.p50 == pytest.approx(values[len(values) // 2], rel=0.001)


@pytest.mark.parametrize(("text", "message"), [
    ("", "is empty"),
    ("  \n\n", "is empty"),
    ("[]", "holds no durations"),
    ("seconds\n", "has a header and no durations"),
    ("1\nabc\n2\n", "line 2 is not a number: 'abc'"),
    ('[1, "x"]', "item 2 is not a number"),
    ("[1, -2]", "item 2 is negative"),
    ("1\n-0.5\n", "line 2 is negative"),
    ("[0, 0]", "every duration is 0"),
    ('[1, NaN]', "item 2 is not a finite number"),
    ('{"p50": 2, "p90": 1}', "percentiles must not decrease: p50 = 2 s but p90 = 1 s"),
    ('{"p90": 5, "max": 9}', "needs p50"),
    ('{"p50": 5}', "needs at least one point above the median"),
    ('{"p50": 1, "p150": 5}', "unknown key 'p150'"),
    ('{"p50": 1, "mean": 5}', "unknown key 'mean'"),
    ('{"p50": 0, "max": 5}', "p50 must be above 0"),
    ("{oops", "is not valid JSON"),
    ("[[1, 2]]", "item 1 is not a number"),
    ("a,b\n1,2\n", "has several columns (columns: a, b); name the durations as FILE:COLUMN"),
])  # fmt: skip
def test_bad_durations_are_one_line_errors_naming_the_file(text: str, message: str):
    with pytest.raises(UsageError) as info:
        parse_task_times(text, "task times file 't.csv'")
    assert message in str(info.value) and str(info.value).startswith("task times file 't.csv'")
    assert "\n" not in str(info.value)


def test_a_missing_file_or_column_is_named(tmp_path: Path):
    with pytest.raises(UsageError, match="cannot be read"):
        load_task_times(str(tmp_path / "none.csv"))
    spec = _write(tmp_path, "t.csv", "id,took\n1,2\n") + ":took_s"
    with pytest.raises(UsageError, match=r"has no column 'took_s' \(columns: id, took\)"):
        load_task_times(spec)


def test_scaling_divides_every_duration():
    t = parse_task_times("[1, 2, 60]", "f")
    assert t.scaled(4) == (0.25, 0.5, 15.0)


def test_the_workers_draw_only_observed_durations_and_the_model_reads_the_same_samples():
    samples = (0.01, 0.02, 0.03, 0.5)
    tt = TaskTime(dist="empirical", mean=0.14, max=0.5, samples=samples)
    rng = random.Random(7)
    draws = [draw_task_time(rng, tt) for _ in range(4000)]
    assert set(draws) == set(samples)  # every one drawn, the longest included, nothing else
    assert draws.count(0.5) == pytest.approx(1000, rel=0.15)
    assert [draw_task_time(random.Random(3), tt) for _ in range(5)] == \
        [draw_task_time(random.Random(3), tt) for _ in range(5)]  # fmt: skip
    assert (survival(tt, 0.025), survival(tt, 0.5), quantile(tt, 1.0)) == (0.5, 0.0, 0.5)
