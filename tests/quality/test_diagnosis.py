"""The plain-words diagnosis and violations.csv: every planted bug is named by its defect, and every
violation is listed, one row each.

Why the replay's hand-written histories: each is what one planted queue answered, in a real run, to
the task that broke (tests/quality/test_replay.py), so the diagnosis is tested on the exact shapes
each defect leaves in a history, and a bug that one process cannot replay (a race, a task passed
over) is covered too. Real runs of every planted queue were diagnosed the same way when this was
written; the stored runs of tests/fixtures/runs pin their diagnosis in their expected summaries.
"""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from pathlib import Path

import pytest

from takeover._internal.checker import analyse
from takeover._internal.checker.patterns import (
    IDEMPOTENT,
    LOST_COMMIT,
    NOT_ATOMIC,
    NOT_FENCED,
    PATTERNS,
    REGISTER_RESETS,
)
from takeover._internal.pipeline import check_and_report
from takeover._internal.store import VIOLATIONS_CSV
from takeover.cli import main
from takeover.queues.planted import DIAGNOSED, PLANTED
from tests.quality.builder import one_task
from tests.quality.cases import CASES
from tests.quality.test_replay import NOT_IN_ONE_PROCESS, REPRODUCIBLE, claim, finish, history, reregister

# planted bug -> (invariant, pattern) its history must show, and the defect every symptom must name
EXPECTED: dict[str, tuple[str, str, str]] = {
    "FinishIgnoresGeneration": ("no_stale_commit", "stale_commit", NOT_FENCED),
    "FinishIgnoresLease": ("finish_within_lease", "late_finish", PATTERNS["finish_within_lease"]["late_finish"].defect),
    "ReclaimsTerminal": ("no_reclaim_after_terminal", "reclaimed_after_lease",
                         PATTERNS["no_reclaim_after_terminal"]["reclaimed_after_lease"].defect),
    "NoBumpOnTakeover": ("generation_monotonic", "no_bump", PATTERNS["generation_monotonic"]["no_bump"].defect),
    "BumpsByTwo": ("generation_monotonic", "skipped", PATTERNS["generation_monotonic"]["skipped"].defect),
    "StealsLiveLeases": ("lease_exclusive", "lease_stolen", PATTERNS["lease_exclusive"]["lease_stolen"].defect),
    "IdempotentFinish": ("single_finish", "accepted_when_finished", IDEMPOTENT),
    "FinishNotDurable": ("state_matches_history", "finish_not_durable", LOST_COMMIT),
    "SnapshotOffByOne": ("state_matches_history", "snapshot_behind",
                         PATTERNS["state_matches_history"]["snapshot_behind"].defect),
    "DropsTasks": ("no_lost_task", "passed_over", PATTERNS["no_lost_task"]["passed_over"].defect),
    "NonAtomicClaim": ("lease_exclusive", "claim_race", NOT_ATOMIC),
    "RegisterReplaces": ("no_reclaim_after_terminal", "reset_by_register", REGISTER_RESETS),
}
BUILDS = {name: entry[0] for name, entry in {**REPRODUCIBLE, **NOT_IN_ONE_PROCESS}.items()}


def test_every_planted_bug_has_an_expected_diagnosis() -> None:
    assert set(EXPECTED) == set(PLANTED) == set(BUILDS)
    # what the detection bench holds real runs to is what these histories are held to
    assert {name: (inv, pattern) for name, (inv, pattern, _) in EXPECTED.items()} == DIAGNOSED
    assert all(PATTERNS[inv][pattern].defect == defect for inv, pattern, defect in EXPECTED.values())


def _folder(tmp_path: Path, name: str) -> Path:
    return BUILDS[name]().write(tmp_path / name, config={"queue": f"takeover.queues.planted:{name}"})


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_diagnosis_names_the_planted_defect(tmp_path: Path, name: str) -> None:
    invariant, pattern, defect = EXPECTED[name]
    entries = analyse(_folder(tmp_path, name)).summary["diagnosis"]
    assert (invariant, pattern) in {(e["invariant"], e["pattern"]) for e in entries}, entries
    # Every invariant the bug broke is told as a symptom of the same defect, never of another one.
    assert {e["defect"] for e in entries} == {defect}, entries
    for e in entries:
        assert e["sentence"].endswith(f": {defect} ({e['scenario']})")
        assert e["scenario"] in {"S1", "S2", "S3", "S4", "S5"}
        assert e["tasks"] and e["task_count"] >= 1 and e["count"] >= 1


def test_a_race_is_not_offered_for_a_one_process_replay(tmp_path: Path) -> None:
    out = io.StringIO()
    folder = _folder(tmp_path, "NonAtomicClaim")
    check_and_report(folder, out=out, reports=False)
    [entry] = json.loads((folder / "summary.json").read_text())["diagnosis"]
    assert entry["replay_task"] is None
    assert "one process cannot replay it" in out.getvalue() and "takeover replay" not in out.getvalue()


def test_the_console_names_the_defect_and_the_command_that_confirms_it(tmp_path: Path) -> None:
    out = io.StringIO()
    folder = _folder(tmp_path, "FinishIgnoresGeneration")
    check_and_report(folder, out=out, reports=False)
    text = out.getvalue()
    assert "finish() accepted generation 1 of task a at 7 s after generation 2 was claimed: completion is not " \
           "fenced by the generation (S3)" in text
    assert f"confirm it in one process: takeover replay {folder} --task a" in text
    assert VIOLATIONS_CSV in text


def test_a_correct_registration_around_a_violation_is_not_blamed(tmp_path: Path) -> None:
    """A task registered again between a takeover that kept generation 1 and the claim before it:
    the queue ignored the registration (no generation went back, no snapshot at 0), so the
    diagnosis stays with the missing bump, not with register()."""
    build = history(claim(1, 0, 1), reregister(0, 3), claim(2, 6, 1), finish(2, 7, 1), snap=("done", 1, None))
    entries = analyse(build().write(tmp_path / "run")).summary["diagnosis"]
    assert [(e["invariant"], e["pattern"]) for e in entries] == [("generation_monotonic", "no_bump")]


def test_a_valid_run_has_no_diagnosis_key(tmp_path: Path) -> None:
    build, violated = CASES["clean_run"]
    folder = build().write(tmp_path / "run")
    check_and_report(folder, out=io.StringIO(), reports=False)
    assert "diagnosis" not in json.loads((folder / "summary.json").read_text())
    with (folder / VIOLATIONS_CSV).open() as f:
        assert list(csv.reader(f)) == [["invariant", "pattern", "task", "at", "generations", "processes", "cause"]]


def _csv_counts(folder: Path) -> tuple[Counter, Counter, list[dict[str, str]]]:
    with (folder / VIOLATIONS_CSV).open(newline="") as f:
        rows = list(csv.DictReader(f))
    return Counter(r["invariant"] for r in rows), Counter((r["invariant"], r["pattern"]) for r in rows), rows


BUILDERS = {**{f"case:{k}": v[0] for k, v in CASES.items()}, **{f"planted:{k}": v for k, v in BUILDS.items()}}


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_violations_csv_lists_every_violation(tmp_path: Path, name: str) -> None:
    folder = BUILDERS[name]().write(tmp_path / "run")
    check_and_report(folder, out=io.StringIO(), reports=False)
    summary = json.loads((folder / "summary.json").read_text())
    per_invariant, per_pattern, rows = _csv_counts(folder)
    assert dict(per_invariant) == {n: inv["violations"] for n, inv in summary["invariants"].items()
                                   if inv["violations"]}
    assert dict(per_pattern) == {(e["invariant"], e["pattern"]): e["count"] for e in summary.get("diagnosis", [])}
    for row in rows:  # each row says which task, and the examples' fields of its invariant
        assert row["invariant"] in summary["invariants"]
        assert row["task"] or row["invariant"] == "no_lost_task"


def test_a_gap_of_two_generations_is_two_violations(tmp_path: Path) -> None:
    """A claim that returns generation 3 first skips two generations nobody can have taken: two
    rows, and one indeterminate claim before it explains one of them."""
    for killed, expected in ((False, 2), (True, 1)):
        r = one_task()
        if killed:
            r.claim(2, 0, None, status="info")
        r.claim(1, 1, "a", 3)
        r.snap(("a", "running", 3, 6.0))
        folder = r.write(tmp_path / f"run-{killed}")
        check_and_report(folder, out=io.StringIO(), reports=False)
        summary = json.loads((folder / "summary.json").read_text())
        assert summary["invariants"]["generation_monotonic"]["violations"] == expected
        per_invariant, _, rows = _csv_counts(folder)
        assert per_invariant["generation_monotonic"] == expected
        assert {r["generations"] for r in rows if r["invariant"] == "generation_monotonic"} == {"0 3"}


def test_the_python_api_message_tells_the_diagnosis_once(tmp_path: Path) -> None:
    """A failing ``takeover.check``/``stress`` says the defect in its message, once."""
    import takeover

    result = takeover.check(_folder(tmp_path, "StealsLiveLeases"))
    [entry] = result.summary["diagnosis"]
    assert result.diagnosis() == [entry["sentence"]]
    assert result.message().count(entry["sentence"]) == 1


@pytest.mark.parametrize("name, scenario, step", [("FinishIgnoresGeneration", "S3", 6), ("NoBumpOnTakeover", "S2", 5),
                                                  ("StealsLiveLeases", "S2", 4), ("BumpsByTwo", "S1", 2)])
def test_the_spec_scenario_confirms_the_diagnosis_on_the_runs_queue(tmp_path: Path, name: str, scenario: str,
                                                                    step: int) -> None:
    """Right after a run (``confirm``), the spec's scenarios run against the run's own queue: the
    pattern is confirmed where a scenario step departs from the spec breaking the same invariant."""
    out = io.StringIO()
    folder = _folder(tmp_path, name)
    result = check_and_report(folder, out=out, reports=False, confirm=True)
    invariant, pattern, _ = EXPECTED[name]
    [entry] = [e for e in result.summary["diagnosis"] if (e["invariant"], e["pattern"]) == (invariant, pattern)]
    assert entry["confirmed_by"].startswith(f"spec scenario {scenario} departs at step {step}: "), entry
    assert json.loads((folder / "summary.json").read_text())["diagnosis"] == result.summary["diagnosis"]
    assert f"confirmed by the spec: spec scenario {scenario}" in out.getvalue()


@pytest.mark.parametrize("queue", ["takeover.queues.sqlite_lease:SQLiteLeaseQueue", "not_installed_here:Queue"])
def test_nothing_is_confirmed_by_a_queue_that_keeps_the_spec_or_cannot_be_loaded(tmp_path: Path, queue: str) -> None:
    """The same history, judged with a queue that passes every scenario (or one not installed
    here): the diagnosis stands on the run folder, unconfirmed, and nothing fails."""
    folder = BUILDS["FinishIgnoresGeneration"]().write(tmp_path / "run", config={"queue": queue})
    result = check_and_report(folder, out=io.StringIO(), reports=False, confirm=True)
    assert result.summary["diagnosis"] and not any("confirmed_by" in e for e in result.summary["diagnosis"])


def test_takeover_check_confirms_nothing(tmp_path: Path) -> None:
    """Re-checking a folder reads the folder only: no scenario runs, nothing is confirmed."""
    folder = _folder(tmp_path, "FinishIgnoresGeneration")
    check_and_report(folder, out=io.StringIO(), reports=False)
    assert not any("confirmed_by" in e for e in json.loads((folder / "summary.json").read_text())["diagnosis"])


def test_takeover_check_keeps_what_the_run_confirmed(tmp_path: Path) -> None:
    """The run's own check confirmed the pattern on its queue; `takeover check` of the folder, with
    the queue no longer loadable here, runs nothing and keeps that confirmation, pattern by pattern."""
    folder = _folder(tmp_path, "FinishIgnoresGeneration")
    confirmed = check_and_report(folder, out=io.StringIO(), reports=False, confirm=True).summary["diagnosis"]
    assert any("confirmed_by" in e for e in confirmed), confirmed
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | {"queue": "not_installed_here:Queue"}))
    out = io.StringIO()
    assert main(["check", "--no-reports", str(folder)]) == 1
    again = json.loads((folder / "summary.json").read_text())["diagnosis"]
    assert [e.get("confirmed_by") for e in again] == [e.get("confirmed_by") for e in confirmed]
    assert check_and_report(folder, out=out, reports=False).summary["diagnosis"] == again
    assert f"confirmed by the spec: {confirmed[0]['confirmed_by']}" in out.getvalue()


def test_a_fresh_confirmation_that_finds_nothing_keeps_no_earlier_one(tmp_path: Path) -> None:
    """A check that confirms (right after a run) is the only authority: a confirmation an earlier summary.json
    holds is not carried past a replay that no longer finds it (the queue here keeps the spec)."""
    folder = _folder(tmp_path, "FinishIgnoresGeneration")
    assert any("confirmed_by" in e for e in
               check_and_report(folder, out=io.StringIO(), reports=False, confirm=True).summary["diagnosis"])
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | {"queue": "takeover.queues.sqlite_lease:SQLiteLeaseQueue"}))
    result = check_and_report(folder, out=io.StringIO(), reports=False, confirm=True)
    assert result.summary["diagnosis"] and not any("confirmed_by" in e for e in result.summary["diagnosis"])


def test_a_confirmation_is_kept_only_for_its_own_scenario_and_invariant(tmp_path: Path) -> None:
    """What confirms a pattern is chosen by its scenario and invariant: a confirmation the folder
    holds for another pair is not put on this one, and a summary.json that is damaged or of another
    shape confirms nothing and stops nothing (the re-check writes it again)."""
    folder = _folder(tmp_path, "FinishIgnoresGeneration")
    summary = check_and_report(folder, out=io.StringIO(), reports=False, confirm=True).summary
    for e in summary["diagnosis"]:
        e["scenario"] = "S1" if e["scenario"] != "S1" else "S2"
    for written in (json.dumps(summary), "{not json", json.dumps({"diagnosis": [7, {"scenario": 1}]}), "[]"):
        (folder / "summary.json").write_text(written)
        result = check_and_report(folder, out=io.StringIO(), reports=False)
        assert result.exit_code == 1 and not any("confirmed_by" in e for e in result.summary["diagnosis"]), written


def test_an_upsert_that_keeps_the_generation_is_blamed_on_the_registration(tmp_path: Path) -> None:
    """register() puts an uncertain task back to pending but keeps its generation (issue 23's user
    queue): the next claim raises the generation as usual, so only the registration in between tells
    a reset from a claim that takes finished tasks. Without that registration the same claim is the
    claim's own defect."""
    for again, pattern in ((True, "reset_by_register"), (False, "reclaimed")):
        r = one_task()
        r.work(1, 0, "a", 1, "uncertain")
        if again:
            r.reregister(3, 0, "a")
        r.claim(2, 6, "a", 2)
        r.snap(("a", "running", 2, 11.0))
        folder = r.write(tmp_path / f"run-{again}")
        check_and_report(folder, out=io.StringIO(), reports=False)
        summary = json.loads((folder / "summary.json").read_text())
        patterns = {e["pattern"] for e in summary["diagnosis"] if e["invariant"] == "no_reclaim_after_terminal"}
        assert (pattern in patterns) if again else ("reset_by_register" not in patterns and patterns), patterns
