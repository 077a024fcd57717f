"""A claim run twice by its client's retry, on hand-written histories (takeover._internal.checker.unknown_claims): the
generation its first run took is a violation whose pattern and cause say so, in violations.csv; the same
skipped generation without a lost reply is named as a skip, with no cause. The verdicts themselves are
tests/quality/cases.py's (retried_claim_*, unknown_claim_*); the real runs are
tests/quality/test_planted_redis.py's."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest

from takeover._internal.checker.facts import build_facts
from takeover._internal.checker.load import load_run
from takeover._internal.checker.unknown_claims import GRACE, claim_ends, unexplained
from takeover._internal.pipeline import check_and_report
from takeover._internal.store import VIOLATIONS_CSV
from tests.quality.cases import _retried_claim


def _violations(folder: Path) -> list[dict[str, str]]:
    check_and_report(folder, out=io.StringIO(), reports=False)
    with (folder / VIOLATIONS_CSV).open() as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize(("lost", "patterns", "cause"), [
    (True, {"generation_monotonic": "claim_retried", "state_matches_history": "probe_claim_retried"}, "db_lost_reply"),
    (False, {"generation_monotonic": "skipped", "state_matches_history": "probe_generation_unreported"}, ""),
])  # fmt: skip
def test_the_orphaned_generation_is_named_after_the_lost_reply(tmp_path: Path, lost: bool, patterns: dict[str, str],
                                                               cause: str) -> None:  # fmt: skip
    rows = _violations(_retried_claim("redis", lost=lost).write(tmp_path / "run"))
    assert {r["invariant"]: r["pattern"] for r in rows} == patterns
    assert {r["cause"] for r in rows} == {cause}
    assert {r["task"] for r in rows} == {"a"}


def test_an_unknown_claim_ends_at_its_process_exit_or_after_the_freeze_that_held_it(tmp_path: Path) -> None:
    def ends(unknown: str, db: str = "redis") -> np.ndarray:
        folder = _retried_claim(db, unknown=unknown).write(tmp_path / f"{unknown}-{db}")
        fx = build_facts(load_run(folder))
        return claim_ends(fx) - fx.t0

    assert ends("early") == pytest.approx([0.015 + GRACE])  # killed mid-call: its exit record, 10 ms after the kill
    assert ends("late") == pytest.approx([10.21 + GRACE])
    assert ends("paused") == pytest.approx([9.5 + GRACE])  # ended info at 1, but the server was frozen until 9.5
    assert ends("early", "postgres") == [np.inf]  # no bound: the invoke-time rule


def test_the_matching_gives_each_unknown_claim_to_one_generation_and_serves_the_earliest_deadline_first(
        tmp_path: Path) -> None:  # fmt: skip
    fx = build_facts(load_run(_retried_claim("redis", unknown="late").write(tmp_path / "run")))
    t0, inf = fx.t0, np.inf
    # One unknown claim, alive from 9.8 to 10.21 (+ grace): it fits a window (9, 11) or (10, 16), not (13, 16)
    # (it ended before) nor (0, 5) (invoked after); of two windows that fit, it explains the first due.
    got = unexplained(fx, np.array([9, 13, -inf]) + t0, np.array([11, 16, 5]) + t0, np.array([1, 1, 1]))
    assert got.tolist() == [0, 1, 1]
    got = unexplained(fx, np.array([10, 9]) + t0, np.array([16, 11]) + t0, np.array([1, 1]))
    assert got.tolist() == [1, 0]
    assert unexplained(fx, np.array([9.0]) + t0, np.array([11.0]) + t0, np.array([2])).tolist() == [1]


@pytest.mark.parametrize("in_claim", [True, False])
def test_a_run_whose_lost_answers_never_hit_a_claim_that_took_a_task_says_it_did_not_test_that(
        tmp_path: Path, in_claim: bool) -> None:  # fmt: skip
    """--db-lost-reply-rate asked, and every answer lost was a finish's: a queue whose claim is not safe to run
    twice passes such a run, so its summary says what was not tried."""
    r = _retried_claim("redis", lost=in_claim)
    if not in_claim:  # the answer to w1's finish of b is lost instead, inside that call (records in time order)
        at = 1 + next(i for i, rec in enumerate(r.records)
                      if (rec["f"], rec["type"], rec.get("task")) == ("finish", "invoke", "b"))  # fmt: skip
        r.rec(12.002, 0, "invoke", "db_lost_reply", worker="w1", target=1)
        r.rec(12.005, 0, "ok", "db_lost_reply", worker="w1", target=1, value="4")
        r.records[at:at] = r.records[-2:]
        del r.records[-2:]
    folder = r.write(tmp_path / "run", config={"db_lost_reply_rate": 1.0})
    check_and_report(folder, out=io.StringIO(), reports=False)
    warnings = json.loads((folder / "summary.json").read_text())["warnings"]
    said = [w for w in warnings if w.startswith("--db-lost-reply-rate")]
    assert said == ([] if in_claim else [
        "--db-lost-reply-rate 1: none of the server's 1 lost answer(s) fell in a claim that took a task (0 in claims "
        "that took none), so whether a claim resent after a lost reply runs twice was not tested"])
