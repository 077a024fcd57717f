"""`takeover explore` as users run it: random call sequences on a real queue in one process, a departure
shrunk and written as a scenario file that `takeover scenarios --file` reruns and fails, the reference
queue passing, bad input one line, and the same seed giving the same shrunk sequence.

The model it judges by (several tasks: any claimable one is a right claim) is tests/unit/test_replay_model.py.
"""

from __future__ import annotations

import json

import pytest

from takeover._internal.explorer import explore_queue
from takeover.cli import main
from takeover.contract import REFERENCE_QUEUE
from tests.helpers.processes import takeover
from tests.helpers.queues import on_path

STALE = "spec_departures:StaleFinishQueue"  # finishes by task id alone, whatever the generation or the lease


@pytest.mark.slow
def test_explore_catches_a_known_bad_queue_and_writes_a_scenario_that_fails_on_it(tmp_path):
    out = tmp_path / "found"
    proc = takeover("explore", "--queue", STALE, "--examples", "30", "--out", str(out), "--json", timeout=180)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    departure = doc["departure"]
    assert departure["invariants"], doc
    assert len(departure["steps"]) <= 8  # shrunk: a handful of steps, not the twenty of an example
    scenario = out / "explore.json"
    assert doc["scenario_file"] == str(scenario) and (out / "test_explore.py").is_file()
    again = takeover("scenarios", "--file", str(scenario), timeout=60)  # the file names the queue that broke
    assert again.returncode == 1, again.stdout + again.stderr
    assert departure["invariants"][0] in again.stdout
    fixed = takeover("scenarios", "--file", str(scenario), "--queue", REFERENCE_QUEUE, timeout=60)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr


def test_explore_passes_the_reference_queue():
    result = explore_queue(REFERENCE_QUEUE, seed=3, examples=25)
    assert result.ok, result.message()
    assert result.examples >= 25 and result.steps > 100


def test_explore_resolves_an_uncertain_task_of_its_generation_within_a_few_examples():
    """The one resolve that changes a task (uncertain, its own generation) is drawn often enough that a
    resolve answering False after a change departs in a few examples (it took about a hundred)."""
    on_path()
    result = explore_queue("spec_departures:ResolveAnswersFalseQueue", seed=1, examples=20, shrink_budget=20)
    assert result.failure is not None, result.message()
    last = result.failure.steps[-1].spec
    assert last["step"] == "resolve" and result.failure.invariants == ("spec",), result.message()


def test_the_same_seed_finds_the_same_shrunk_sequence():
    on_path()
    first = explore_queue(STALE, seed=5, examples=20, shrink_budget=40)
    second = explore_queue(STALE, seed=5, examples=20, shrink_budget=40)
    assert first.failure is not None and second.failure is not None
    assert [s.spec for s in first.failure.steps] == [s.spec for s in second.failure.steps]
    assert first.written is not None and second.written is not None
    assert first.written.shrunk is not None and second.written.shrunk is not None
    assert first.written.shrunk.steps == second.written.shrunk.steps


@pytest.mark.parametrize("args, words", [
    (["--examples", "0"], "--examples: must be a whole number of 1 or more"),
    (["--seconds", "-1"], "--seconds: must be a positive number of seconds"),
    (["--examples", "3", "--seconds", "2"], "not allowed with argument"),
    (["--queue", "no_such_module:Q"], "no_such_module"),
    (["--db", "mysql"], "--db must be sqlite, postgres, redis, a postgresql:// URL or a redis:// URL"),
    (["--queue", "spec_departures:ExplodingConstructorQueue"], "failed to open"),  # before any example
])
def test_bad_input_is_one_line_and_exit_2(args, words, tmp_path, capsys, monkeypatch):
    """The command line's own entry point, in this process (a process per bad value costs seconds)."""
    on_path()
    monkeypatch.chdir(tmp_path)
    assert main(["explore", *args]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], err
    assert not any(tmp_path.iterdir())  # nothing written


def test_the_printed_sequence_is_the_written_one(tmp_path):
    """The steps explore prints are the scenario it writes (minimal: no step the departure does not need), and
    explore-result.json's departure holds the same; "spec" is never told as an invariant (issue 36)."""
    on_path()
    result = explore_queue("user_mistakes:ExtendIgnoresGeneration", seed=1, examples=30, out=tmp_path)
    assert result.failure is not None and result.written is not None and result.written.shrunk is not None
    written = json.loads((tmp_path / "explore.json").read_text())["scenarios"][0]["steps"]
    text = result.message()
    shown = [line for line in text.splitlines() if line[:4].strip().rstrip(".").isdigit()]
    assert len(shown) == len(written), text
    for line, step in zip(shown, written, strict=True):
        assert f" {step['step']}" in line, (line, step)
    assert [(s["step"], s["t"]) for s in result.to_json()["departure"]["steps"]] == \
        [(s["step"], s["t"]) for s in written]
    assert not text.startswith("DEPARTED from the spec: spec") and "breaks spec" not in text, text


def test_a_queue_whose_claim_never_returns_is_inconclusive_not_bad_input(tmp_path):
    """issue 34: explore on a queue whose claim hangs exited 2 (bad input); it names the call and exits 3."""
    proc = takeover("explore", "--queue", "hanging_queue:ClaimHangs", "--examples", "5", "--step-timeout", "5",
                    timeout=120)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr == ""
    said = [line for line in proc.stdout.splitlines() if line.startswith("INCONCLUSIVE")]
    assert said == ["INCONCLUSIVE: the queue does not answer: claim() did not return within 5 s; nothing was "
                    "explored"], proc.stdout


@pytest.mark.slow
def test_a_departure_that_needs_two_tasks_writes_a_scenario_of_both(tmp_path):
    """A finish that forgot the task id ends every running task of its generation: no one task's steps break
    anything, so explore writes one scenario of two tasks (issue 36), shrunk, that fails on the queue at the
    departing step and passes on a correct queue (the reference, and the same user's queue without the mistake)."""
    out = tmp_path / "found"
    proc = takeover("explore", "--queue", "two_task_bugs:FinishFencedWithoutKey", "--seed", "1", "--examples",
                    "60", "--out", str(out), "--json", timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["departure"]["scenario"]["tasks"] == ["t1", "t2"], doc["departure"]
    [scenario] = json.loads((out / "explore.json").read_text())["scenarios"]
    assert scenario["tasks"] == ["t1", "t2"] and "task" not in scenario
    steps = scenario["steps"]
    assert [s["step"] for s in steps] == ["register", "claim", "register", "claim", "finish"], steps
    assert [s["task"] for s in steps] == ["t1", "t1", "t2", "t2", "t1"], steps  # a claim's: the one it must get
    assert steps[-1]["snapshot"]["t2"][0] == "running", steps[-1]  # what the queue loses: the other task's row
    again = takeover("scenarios", "--file", str(out / "explore.json"), "--json", timeout=60)
    assert again.returncode == 1, again.stdout + again.stderr
    [replayed] = json.loads(again.stdout)["scenarios"]
    failed = [s for s in replayed["steps"] if not s["ok"]]
    assert len(failed) == 1 and failed[0]["mismatch"] == ["snapshot"] and failed[0] is replayed["steps"][-1]
    for queue in (REFERENCE_QUEUE, "user_mistakes:UserQueue"):
        fixed = takeover("scenarios", "--file", str(out / "explore.json"), "--queue", queue, timeout=60)
        assert fixed.returncode == 0, queue + fixed.stdout + fixed.stderr


def test_a_two_task_departure_behind_claims_of_several_right_answers_is_written_with_one_each(tmp_path, capsys):
    """Both tasks registered, then two claims: each claim may take either task, so a file naming the task a
    claim must get would fail a correct queue that took the other. Explore moves a register later (every claim
    then has one right answer) and writes that; it replays as a departure on the queue, and passes a correct one."""
    on_path()
    queue = "two_task_bugs:SnapshotLosesASecondRunningTask"
    result = explore_queue(queue, seed=2, examples=60, out=tmp_path)
    assert result.scenario_file is not None, result.message()
    [scenario] = json.loads(result.scenario_file.read_text())["scenarios"]
    steps = scenario["steps"]
    assert len(scenario["tasks"]) == 2 and [s["step"] for s in steps] == ["register", "claim"] * 2, steps
    assert steps[1]["task"] == steps[0]["task"] and steps[3]["task"] == steps[2]["task"], steps
    assert main(["scenarios", "--file", str(result.scenario_file), "--queue", queue]) == 1
    assert main(["scenarios", "--file", str(result.scenario_file), "--queue", REFERENCE_QUEUE]) == 0
    assert "✗ state_matches_history step 4" in capsys.readouterr().out
