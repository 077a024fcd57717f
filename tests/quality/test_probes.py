"""Mid-run snapshot probes (takeover._internal.checker.probes): dated at the probe, told in words, never judged
across what makes them indeterminate."""

from __future__ import annotations

import io
from pathlib import Path

from takeover._internal.checker import analyse
from takeover._internal.checker.load import load_probes
from takeover._internal.pipeline import check_and_report
from tests.quality.builder import Run
from tests.quality.cases import probe_sees_a_lost_commit


def test_a_lost_commit_is_dated_at_the_probe_and_told_in_words(tmp_path: Path) -> None:
    result = analyse(probe_sees_a_lost_commit().write(tmp_path / "run"))
    inv = result.invariants["state_matches_history"]
    assert inv.valid is False and inv.first_at == 3.2
    example = inv.examples[0]
    assert example["probe"] == 0 and example["answered_at"] == 3.01 and example["later_by"] == 0.19
    entry = next(e for e in result.summary["diagnosis"] if e["pattern"] == "probe_finish_lost")
    assert "answered True at 3.01 s was not in the table 0.19 s later" in entry["sentence"]
    out = io.StringIO()
    check_and_report(tmp_path / "run", out=out, reports=False)
    assert "was not in the table" in out.getvalue()


def _finish_then_power_loss_then_probe(power_loss: bool) -> Run:
    r = Run()
    r.register("a")
    r.spawn(1, "w1")
    r.work(1, 1, "a", 1)  # finish answered True at 3.01
    if power_loss:
        r.power_loss(4, 1)
    r.probe(4.5, ("a", "running", 1, 6.0))  # the finish is gone from the table
    r.snap(("a", "done", 1, None))
    return r


def test_a_power_loss_between_the_answer_and_the_probe_excuses_the_probe(tmp_path: Path) -> None:
    lost = analyse(_finish_then_power_loss_then_probe(power_loss=True).write(tmp_path / "lost"))
    assert lost.invariants["state_matches_history"].valid is True
    own = analyse(_finish_then_power_loss_then_probe(power_loss=False).write(tmp_path / "own"))
    assert own.invariants["state_matches_history"].valid is False


def test_a_sampled_probe_does_not_call_the_rows_it_left_out_missing(tmp_path: Path) -> None:
    r = Run()
    r.register("a", "b")
    r.probe(1, ("a", "pending", 0, None), total=2)  # b left out of a sample of a larger table
    r.probe(2, ("a", "pending", 0, None))  # every row kept: b is missing
    r.snap(("a", "pending", 0, None), ("b", "pending", 0, None))
    r.run_event(3, "interrupted")
    result = analyse(r.write(tmp_path / "run"))
    rows = [v for v in result.violations if v["invariant"] == "state_matches_history"]
    assert [(v["task"], v["probe"], v["pattern"]) for v in rows] == [("b", 1, "probe_row_missing")]


def test_a_torn_last_line_of_probes_jsonl_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "probes.jsonl"
    path.write_text('{"probe": 0, "total": 1, "tasks": [["a", "done", 1, null]]}\n{"probe": 1, "tot')
    frame, totals = load_probes(path)
    assert frame is not None and list(frame["probe"]) == [0.0] and totals == {0: 1}
    assert load_probes(tmp_path / "absent.jsonl") == (None, {})
