"""Diagnoses checked against runs whose cause is known (tests/quality/known_causes.py): every diagnosis of a
stored real run names the row's defect and no other, and the example each sentence is told from does not
contradict the sentence (a finish "after" a claim that returned later, a reclaim before the finish it came
after). The claim race is named as one, in the words of the run's database, also when a claim in flight
took a task its holder had just finished (issue 36's PostgreSQL run, rebuilt as a history below)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from takeover._internal.checker.patterns import (
    CHECK_THEN_ACT,
    CLAIM_RACE,
    NOT_ATOMIC_ANY,
    NOT_FENCED,
    PATTERNS,
    database_kind,
)
from takeover._internal.pipeline import check_and_report
from takeover._internal.store import VIOLATIONS_CSV
from tests.quality.builder import Run, one_task
from tests.quality.known_causes import KNOWN, KnownCause, extract


def _first_rows(folder: Path) -> dict[tuple[str, str], dict[str, str]]:
    """violations.csv's first row of each (invariant, pattern): the example its sentence is told from."""
    with (folder / VIOLATIONS_CSV).open(newline="") as f:
        rows = list(csv.DictReader(f))
    first: dict[tuple[str, str], dict[str, str]] = {}
    for row in rows:
        first.setdefault((row["invariant"], row["pattern"]), row)
    return first


def _num(row: dict[str, str], key: str) -> float:
    return float(row[key])


def contradictions(entry: dict[str, Any], row: dict[str, str]) -> list[str]:
    """What in the example ``row`` contradicts the ``entry``'s sentence (empty: nothing)."""
    key, sentence, out = (entry["invariant"], entry["pattern"]), entry["sentence"], []
    if key[0] == "no_stale_commit":
        finish, claimed = _num(row, "finish_at"), _num(row, "claimed_at")
        if f"after generation {row['claimed_gen']} was claimed" in sentence and claimed > finish:
            out.append(f"the finish at {finish} s is said to come after a claim that returned at {claimed} s")
        if key[1] == "claim_race" and claimed < finish:
            out.append(f"the claim is said to be in flight at the finish ({finish} s) but returned at {claimed} s")
    if key[0] == "no_reclaim_after_terminal" and _num(row, "reclaimed_at") < _num(row, "finished_at"):
        out.append("the task is said to be handed out again before the finish it came after")
    if key == ("finish_within_lease", "late_finish") and _num(row, "now") <= _num(row, "lease_until"):
        out.append("a finish said to be late came inside its lease")
    if key == ("lease_exclusive", "lease_stolen") and _num(row, "granted_now") >= _num(row, "lease_until"):
        out.append("a lease said to be stolen had run out")
    return out


def check_diagnosis(folder: Path, defect: str, pattern: tuple[str, str] | None, says: str = "") -> list[dict[str, Any]]:
    """Check the run folder; every diagnosis names ``defect`` (and ``pattern`` is among them), and no
    example contradicts its sentence. Returns the diagnosis."""
    check_and_report(folder, out=io.StringIO(), reports=False)
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["valid"] is False
    entries = summary["diagnosis"]
    told = [(e["invariant"], e["pattern"], e["defect"]) for e in entries]
    assert pattern is None or pattern in {(e["invariant"], e["pattern"]) for e in entries}, told
    assert any(says in e["sentence"] for e in entries), [e["sentence"] for e in entries]
    assert [e for e in entries if e["defect"] != defect] == [], told
    first = _first_rows(folder)
    for e in entries:
        assert e["sentence"].endswith(f": {defect} ({e['scenario']})")
        assert contradictions(e, first[(e["invariant"], e["pattern"])]) == [], e["sentence"]
    return entries


@pytest.mark.parametrize("cause", KNOWN, ids=[k.name for k in KNOWN])
def test_a_known_cause_is_diagnosed_as_its_defect(cause: KnownCause, tmp_path: Path) -> None:
    folder = extract(cause, tmp_path)
    config = json.loads((folder / "config.json").read_text())
    assert config["queue"] == cause.queue  # the archive is the row's run
    check_diagnosis(folder, cause.defect, cause.pattern, cause.says)


def test_the_table_holds_a_run_for_every_planted_bug_and_issue_36s_user_mistakes() -> None:
    from takeover.queues.planted import PLANTED

    names = {k.queue.rpartition(":")[2] for k in KNOWN}
    assert set(PLANTED) <= names
    assert len({k.queue for k in KNOWN if k.user}) >= 6
    assert {"ClaimSubqueryNoLock", "UncertainFinishChecksStateOnly"} <= names
    assert all(k.archive.is_file() for k in KNOWN), [k.name for k in KNOWN if not k.archive.is_file()]
    # both databases' claim races, each in its own words
    races = {database_kind({"db": "postgres" if "--db" in k.args else "sqlite"}): k.defect for k in KNOWN
             if k.pattern and k.pattern[1] == "claim_race"}
    assert races == CLAIM_RACE


def _claim_takes_a_finished_task() -> Run:
    """Issue 36's PostgreSQL run, as a history: w2's claim is in flight (27.99 s to 30.358 s) while w1 claims
    the task (generation 2) and finishes it at 29.303 s; w2's claim then takes the done row as generation 3,
    and its finish is accepted too. The queue's finish is fenced; its claim is not atomic."""
    r = one_task()
    r.spawn(3, "w3")
    r.claim(3, 10, "a", 1)
    r.kill(3, 11)
    r.claim(2, 27.99, "a", 3, done=30.358)
    r.claim(1, 28.0, "a", 2, done=28.05)
    r.action(1, 28.5, "a", 2)
    r.finish(1, 29.303, "a", 2)
    r.action(2, 30.5, "a", 3)
    r.finish(2, 31, "a", 3)
    r.snap(("a", "done", 3, None))
    return r


@pytest.mark.parametrize("db", ["sqlite", "postgres", "redis://localhost:6379/0"])
def test_a_claim_that_takes_a_finished_task_is_a_claim_race_in_the_databases_words(tmp_path: Path, db: str) -> None:
    folder = _claim_takes_a_finished_task().write(tmp_path / "run", config={"db": db})
    defect = CLAIM_RACE.get(database_kind({"db": db}), NOT_ATOMIC_ANY)
    entries = check_diagnosis(folder, defect, ("no_stale_commit", "claim_race"))
    patterns = {(e["invariant"], e["pattern"]) for e in entries}
    assert ("single_finish", "claim_race") in patterns  # not an "idempotent success"
    [stale] = [e for e in entries if e["invariant"] == "no_stale_commit"]
    assert "at 29.303 s took the finished task again as generation 3 (the claim returned at 30.358 s)" in \
        stale["sentence"], stale["sentence"]
    assert "SKIP LOCKED" in defect if db == "postgres" else "SKIP LOCKED" not in defect


def test_a_stale_finish_while_the_takeover_is_in_flight_is_not_said_to_come_after_it(tmp_path: Path) -> None:
    """A stale finish accepted while the newer claim was still in flight, and no sign that the claim took
    effect after it: told with the claim in flight, not "after" it; and when every stale finish of the run
    landed in that moment, a finish that checks, then writes (check-then-act), not one never fenced."""
    r = one_task()
    r.claim(1, 0, "a", 1)
    r.action(1, 1, "a", 1)
    r.claim(2, 5.5, "a", 2, done=6.5)
    r.finish(1, 6, "a", 1)
    r.action(2, 6.6, "a", 2)
    r.finish(2, 7, "a", 2, status="rejected")
    r.snap(("a", "done", 2, None))
    entries = check_diagnosis(r.write(tmp_path / "run"), CHECK_THEN_ACT, ("no_stale_commit", "check_then_act"))
    [stale] = [e for e in entries if e["invariant"] == "no_stale_commit"]
    assert "while the claim that returned generation 2 (at 6.5 s) was in flight" in stale["sentence"]
    # the same stale finish after the claim returned: a finish that is not fenced at all
    r.records = [rec for rec in r.records if not (rec["f"] == "claim" and rec["process"] == 2)]
    r.claim(2, 5.5, "a", 2, done=5.6)
    check_diagnosis(r.write(tmp_path / "after"), NOT_FENCED, ("no_stale_commit", "stale_commit"))


def test_contradictions_are_seen() -> None:
    """The check itself: an example that goes against its sentence is named."""
    entry = {"invariant": "no_stale_commit", "pattern": "stale_commit",
             "sentence": PATTERNS["no_stale_commit"]["stale_commit"].what(
                 {"finish_gen": 2, "task": "a", "finish_at": 29.303, "claimed_gen": 3, "claimed_at": 30.358})}
    row = {"finish_at": "29.303", "claimed_at": "30.358", "claimed_gen": "3"}
    assert contradictions(entry, row) == ["the finish at 29.303 s is said to come after a claim that returned at "
                                          "30.358 s"]
