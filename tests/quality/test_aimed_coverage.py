"""The aimed faults in the checker: their records paired per kind while several are under way at
once, their windows counted (hit, missed and why) in summary.json's fault coverage, and a warning
when a requested kind never reached its window. Real stress runs with aimed faults are in
tests/system/test_aimed.py; these hand-written histories pin the exact counts.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from takeover._internal.checker.counts import NO_END
from takeover._internal.pipeline import check_and_report
from tests.quality.builder import Run
from tests.quality.cases import FEW_AT_THE_GATE as FEW
from tests.quality.cases import overlapping_aimed_faults

AIMED = ("expire_and_return", "stale_return", "claim_stampede", "duplicate_register")


def _summary(folder: Path, out: io.StringIO | None = None) -> dict[str, Any]:
    check_and_report(folder, out=out or io.StringIO())
    return json.loads((folder / "summary.json").read_text())


def test_each_aimed_kind_is_counted_from_its_own_records_while_others_run(tmp_path: Path) -> None:
    s = _summary(overlapping_aimed_faults().write(tmp_path / "run"))
    assert s["valid"] is True
    assert s["counts"]["unpaired_completions"] == 0
    assert s["coverage"]["aimed"] == {
        "expire_and_return": {"total": 1, "hit": 1, "missed": 0, "reasons": {}},
        "stale_return": {"total": 1, "hit": 1, "missed": 0, "reasons": {}},
        "claim_stampede": {"total": 2, "hit": 0, "missed": 2, "reasons": {FEW: 2}},
        "duplicate_register": {"total": 1, "hit": 0, "missed": 1, "reasons": {NO_END: 1}},
    }
    # The freezes the aimed faults made are pauses, each ended by its own resume.
    assert s["coverage"]["pauses"]["total"] == 3
    assert s["coverage"]["pauses"]["length_s"]["max"] == 4.85


def test_a_requested_aimed_kind_that_never_hit_is_a_warning_with_its_reasons(tmp_path: Path) -> None:
    s = _summary(overlapping_aimed_faults().write(tmp_path / "run"))
    aimed_warnings = [w for w in s["warnings"] if any(f"'{k}'" in w for k in AIMED)]
    assert aimed_warnings == [
        f"fault 'claim_stampede' was requested (rate 0.5) but never hit: all 2 window(s) missed - {FEW} (2)",
        f"fault 'duplicate_register' was requested (rate 0.5) but never hit: all 1 window(s) missed - {NO_END} (1)",
    ]


def test_a_requested_aimed_kind_without_records_is_counted_as_never_started(tmp_path: Path) -> None:
    r = Run()
    r.register("a")
    r.spawn(1, "w0")
    r.work(1, 0.1, "a", 1)
    r.run_event(3.0, "drain_end")
    r.snap(("a", "done", 1, None))
    s = _summary(r.write(tmp_path / "run", config={"faults": {"pause": 0.0, "stale_return": 0.3,
                                                                "claim_stampede": 0.0}}))
    assert s["coverage"]["aimed"] == {"stale_return": {"total": 0, "hit": 0, "missed": 0, "reasons": {}}}
    assert "fault 'stale_return' was requested (rate 0.3) but never hit: none of its windows started" in s["warnings"]


def test_a_run_without_aimed_faults_has_no_aimed_coverage(tmp_path: Path) -> None:
    """Older runs (no aimed kinds in config.json) and runs with every aimed rate at 0 keep the
    summary they had: no ``aimed`` key, no warning."""
    r = overlapping_aimed_faults()
    r.records = [rec for rec in r.records if rec["f"] not in AIMED]
    for faults in ({"kill": 0.0, "pause": 0.0}, {"pause": 0.0, **dict.fromkeys(AIMED, 0.0)}):
        folder = r.write(tmp_path / f"run{len(faults)}", config={"faults": faults})
        s = _summary(folder)
        assert "aimed" not in s["coverage"]
        assert not [w for w in s["warnings"] if "never hit" in w]


def test_aimed_records_of_a_kind_not_requested_are_still_counted(tmp_path: Path) -> None:
    """A history is the evidence: records of a kind whose rate config.json lacks are counted too."""
    s = _summary(overlapping_aimed_faults().write(tmp_path / "run", config={"faults": {"pause": 0.0}}))
    assert list(s["coverage"]["aimed"]) == list(AIMED)
    assert not [w for w in s["warnings"] if "never hit" in w]


def _two_stale_returns(order_on_invoke: bool) -> Run:
    """Two stale_return windows, one per order: each freezes its own holder, and the one that started
    second ends first, having hit; the other misses. Without ``order_on_invoke`` the records are as a
    run from before wrote them (the order on the ok alone), one window at a time."""
    r = Run()
    r.register("a", "b")
    for p in (1, 2, 3, 4):
        r.spawn(p, f"w{p - 1}")
    r.claim(1, 0.1, "a", 1)  # lease until 5.1
    r.claim(2, 0.2, "b", 1)  # lease until 5.2
    first, second = ({"order": "stale_first"}, {"order": "new_first"}) if order_on_invoke else ({}, {})
    r.aimed_start("stale_return", 0.3, **first)
    r.pause_start(1, 0.35, 4.75, phase="working", task="a", gen=1, detail="stale_return")
    if order_on_invoke:
        r.aimed_start("stale_return", 0.4, **second)
        r.pause_start(2, 0.45, 4.75, phase="working", task="b", gen=1, detail="stale_return")
    r.claim(3, 5.3, "a", 2)  # a taken over
    r.action(3, 5.35, "a", 2)
    r.finish(3, 5.4, "a", 2)  # the new holder's finish first
    r.pause_end(1, 5.5)
    r.finish(1, 5.6, "a", 1, status="rejected")  # then the stale one, refused
    if order_on_invoke:
        r.aimed_end("stale_return", 5.7, order="new_first", task="a", gen=1, new_gen=2)
        r.pause_end(2, 7.3)
        r.aimed_end("stale_return", 7.4, "no other worker took the task over within 2.0 s of its expiry",
                    order="stale_first", task="b", gen=1)
    else:
        r.aimed_end("stale_return", 5.7, order="stale_first", task="a", gen=1, new_gen=2)
    b_gen = 2 if order_on_invoke else 1
    if order_on_invoke:
        r.work(4, 7.5, "b", 2)  # b taken over too late for its window
    else:
        r.action(2, 0.5, "b", 1)
        r.finish(2, 0.6, "b", 1)
    r.run_event(9.5, "drain_end")
    r.snap(("a", "done", 2, None), ("b", "done", b_gen, None))
    r.config = {"faults": {"pause": 0.0, "stale_return": 0.3}}
    return r


def test_two_stale_return_windows_open_together_are_paired_by_their_order(tmp_path: Path) -> None:
    """A window of each order may be open at once: each ok closes the invoke of its own order, so
    both windows are counted, with their own outcome, and no record is left unpaired."""
    s = _summary(_two_stale_returns(order_on_invoke=True).write(tmp_path / "run"))
    assert s["valid"] is True
    assert s["counts"]["unpaired_completions"] == 0
    why = "no other worker took the task over within 2.0 s of its expiry"
    assert s["coverage"]["aimed"] == {"stale_return": {"total": 2, "hit": 1, "missed": 1, "reasons": {why: 1}}}


def test_a_stale_return_recorded_before_orders_were_on_the_invoke_is_still_paired(tmp_path: Path) -> None:
    """Runs from before wrote the order on the ok alone: its window is paired as it always was."""
    s = _summary(_two_stale_returns(order_on_invoke=False).write(tmp_path / "run"))
    assert s["valid"] is True
    assert s["counts"]["unpaired_completions"] == 0
    assert s["coverage"]["aimed"] == {"stale_return": {"total": 1, "hit": 1, "missed": 0, "reasons": {}}}
