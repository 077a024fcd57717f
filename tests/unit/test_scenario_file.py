"""`takeover scenarios --file`: anyone's own scenario tables, with the transcript, --json and exit
codes of the spec's five; a malformed file is one line naming the problem and exit 2.

The spec's five themselves are tests/unit/test_scenarios.py; the files `takeover replay` writes are
tests/quality/test_replay.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from takeover._internal.scenario.replay import load_spec
from takeover.cli import main
from takeover.contract import REFERENCE_QUEUE
from takeover.exit_codes import ExitCode
from tests.helpers.queues import on_path

pytestmark = pytest.mark.usefixtures("scenario_scratch")

# A heartbeat and a reconciliation, which the spec's five never use: extend keeps a lease alive past
# its first expiry, the lost reply's uncertain is resolved back to pending and claimed again.
OWN = {
    "lease_seconds": 10,
    "scenarios": [
        {"id": "heartbeat", "title": "a heartbeat keeps the lease", "steps": [
            {"t": 0, "step": "register", "state": "pending", "generation": 0},
            {"t": 1, "actor": "A", "step": "claim", "returns": 1, "lease_until": 11},
            {"t": 9, "actor": "A", "step": "extend", "with_generation": 1, "returns": 19, "lease_until": 19},
            {"t": 12, "actor": "B", "step": "claim", "returns": None, "state": "running", "generation": 1},
            {"t": 15, "actor": "A", "step": "finish", "outcome": "done", "with_generation": 1, "returns": True,
             "state": "done"},
        ]},
        {"id": "retry", "title": "uncertain resolved to pending is claimed again", "task": "job-7", "steps": [
            {"t": 0, "step": "register"},
            {"t": 1, "actor": "A", "step": "claim", "lease": 2, "returns": 1, "lease_until": 3},
            {"t": 2, "actor": "A", "step": "finish", "outcome": "uncertain", "with_generation": 1, "returns": True},
            {"t": 5, "step": "resolve", "outcome": "pending", "with_generation": 1, "returns": True,
             "state": "pending", "generation": 1},
            {"t": 6, "actor": "B", "step": "claim", "returns": 2, "state": "running", "generation": 2},
        ]},
    ],
}


def write(tmp_path: Path, doc: object, name: str = "mine.json") -> Path:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc), encoding="utf-8")
    return path


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def test_own_scenarios_pass_on_the_reference_queue(tmp_path, capsys):
    path = write(tmp_path, OWN)
    rc, out, err = run_cli(["scenarios", "--file", str(path)], capsys)
    assert rc == ExitCode.VALID, out
    assert "All 2 scenario(s) match the spec (10 steps)" in out and err == ""
    assert "extend (generation 1)" in out  # a step without a label is named by what it does
    rc, out, _ = run_cli(["scenarios", "--file", str(path), "--json", "--scenario", "retry"], capsys)
    doc = json.loads(out)
    assert rc == ExitCode.VALID and doc["ok"] is True and doc["lease_seconds"] == 10
    [retry] = doc["scenarios"]
    assert retry["id"] == "retry" and [s["ok"] for s in retry["steps"]] == [True] * 5
    assert retry["steps"][1]["lease"] == 2


def test_own_scenarios_fail_where_a_queue_departs(tmp_path, capsys):
    """Every expectation written is compared, and only those: a queue that ignores the lease on
    finish fails the one step that says so."""
    doc = {"scenarios": [{"id": "late", "title": "late finish", "steps": [
        {"t": 0, "step": "register"},
        {"t": 0, "actor": "A", "step": "claim", "lease": 1},
        {"t": 1, "actor": "A", "step": "finish", "outcome": "done", "with_generation": 1, "returns": False},
    ]}]}
    path = write(tmp_path, doc)
    rc, out, _ = run_cli(["scenarios", "--file", str(path), "--queue", "takeover.queues.planted:FinishIgnoresLease",
                          "--json"], capsys)
    got = json.loads(out)
    assert rc == ExitCode.VIOLATED
    assert [s["ok"] for s in got["scenarios"][0]["steps"]] == [True, True, False]
    assert got["scenarios"][0]["steps"][2]["expected"] == {"returns": False}
    rc, out, _ = run_cli(["scenarios", "--file", str(path)], capsys)
    assert rc == ExitCode.VALID


def test_the_file_names_the_queue_it_runs_on(tmp_path, capsys):
    doc = dict(OWN, queue="takeover.queues.planted:NoBumpOnTakeover")
    doc["scenarios"] = [{"id": "takeover", "title": "takeover", "steps": [
        {"t": 0, "step": "register"}, {"t": 0, "actor": "A", "step": "claim", "returns": 1},
        {"t": 10, "actor": "B", "step": "claim", "returns": 2}]}]
    path = write(tmp_path, doc)
    rc, out, _ = run_cli(["scenarios", "--file", str(path)], capsys)
    assert rc == ExitCode.VIOLATED and "NoBumpOnTakeover" in out
    rc, _, _ = run_cli(["scenarios", "--file", str(path), "--queue", REFERENCE_QUEUE], capsys)
    assert rc == ExitCode.VALID


# Two tasks (issue 36): each step names the one it acts on, a claim's ``task`` the one it must hand out (only
# t2 is claimable then), and ``snapshot`` every task's row: finishing t1 must leave t2 running.
TWO = {"lease_seconds": 10, "scenarios": [{"id": "two", "title": "finishing one task leaves the other running",
                                           "tasks": ["t1", "t2"], "steps": [
    {"t": 0, "step": "register", "task": "t1"},
    {"t": 0, "actor": "A", "step": "claim", "task": "t1", "returns": 1},
    {"t": 0, "step": "register", "task": "t2", "state": "pending"},
    {"t": 0, "actor": "B", "step": "claim", "task": "t2", "returns": 1, "state": "running"},
    {"t": 1, "actor": "A", "step": "finish", "task": "t1", "outcome": "done", "with_generation": 1, "returns": True,
     "state": "done", "snapshot": {"t1": ["done", 1, None], "t2": ["running", 1, 10]}},
]}]}


def test_a_scenario_of_two_tasks_checks_the_claimed_task_and_every_row(tmp_path, capsys):
    """The extension explore writes for a departure that needs two tasks (issue 36): a correct queue passes,
    a claim that hands out another task than the one the file names fails that step ("task" mismatches),
    and a finish that ends every running task of its generation fails on the other task's row."""
    path = write(tmp_path, TWO)
    rc, out, _ = run_cli(["scenarios", "--file", str(path), "--json"], capsys)
    assert rc == ExitCode.VALID, out
    steps = json.loads(out)["scenarios"][0]["steps"]
    assert steps[4]["snapshot"] == {"t1": ["done", 1, None], "t2": ["running", 1, 10]}
    wrong = json.loads(json.dumps(TWO))
    wrong["scenarios"][0]["steps"][1]["task"] = "t2"  # t2 is not even registered yet: the claim gets t1
    rc, out, _ = run_cli(["scenarios", "--file", str(write(tmp_path, wrong, "wrong.json")), "--json"], capsys)
    step = json.loads(out)["scenarios"][0]["steps"][1]
    assert rc == ExitCode.VIOLATED and step["mismatch"] == ["task"] and step["expected"]["task"] == "t2", step
    on_path()
    rc, out, _ = run_cli(["scenarios", "--file", str(path), "--queue", "two_task_bugs:FinishFencedWithoutKey",
                          "--json"], capsys)
    got = json.loads(out)["scenarios"][0]["steps"]
    assert rc == ExitCode.VIOLATED and [s["ok"] for s in got] == [True] * 4 + [False], got
    assert got[4]["mismatch"] == ["snapshot"] and got[4]["snapshot"]["t2"] == ["done", 1, None], got[4]


def test_the_spec_file_itself_runs_as_the_five_do(tmp_path, capsys):
    path = write(tmp_path, load_spec(), "spec.json")
    _, via_file, _ = run_cli(["scenarios", "--file", str(path), "--json"], capsys)
    _, builtin, _ = run_cli(["scenarios", "--json"], capsys)
    assert json.loads(via_file) == json.loads(builtin)


STEP = {"t": 0, "step": "register"}


def scenario(*steps: object, **extra: object) -> dict:
    return {"scenarios": [{"id": "S", "title": "x", "steps": list(steps) or [STEP], **extra}]}


@pytest.mark.parametrize("content, words", [
    ("{not json", "not JSON: Expecting property name"),
    ("[]", "the top level must be an object"),
    ({"scenario": []}, "unknown key 'scenario'"),
    ({"lease_seconds": 5}, "missing key 'scenarios'"),
    ({"scenarios": []}, "'scenarios' must be a non-empty list"),
    ({"scenarios": [{"id": "S", "steps": [STEP]}]}, "scenario S: missing key 'title'"),
    ({"scenarios": ["S1"]}, "scenarios[0]: a scenario must be an object"),
    ({"scenarios": [{"id": "S", "title": "x", "steps": [STEP]}, {"id": "S", "title": "y", "steps": [STEP]}]},
     "the id is used by an earlier scenario too"),
    ({"lease_seconds": -1, "scenarios": [{"id": "S", "title": "x", "steps": [STEP]}]},
     "'lease_seconds' must be a positive number"),
    ({"queue": "nocolon", "scenarios": [{"id": "S", "title": "x", "steps": [STEP]}]}, "'queue' must be MODULE:ATTR"),
    (scenario({"t": 0, "step": "claimed", "actor": "A"}), "step 1: unknown step 'claimed'"),
    (scenario({"step": "register"}), "step 1: missing key 't'"),
    (scenario({"t": "0", "step": "register"}), "'t' must be a number"),
    (scenario({"t": 0, "step": "claim"}), "a claim step needs 'actor'"),
    (scenario(STEP, {"t": 1, "step": "finish", "actor": "A", "outcome": "done", "with_generation": "1"}),
     "step 2: 'with_generation' must be an integer, got '1'"),
    (scenario({"t": 1, "step": "finish", "actor": "A", "outcome": "finished", "with_generation": 1}),
     "'outcome' of a finish must be one of done, uncertain"),
    (scenario({"t": 1, "step": "resolve", "outcome": "uncertain", "with_generation": 1}),
     "'outcome' of a resolve must be one of done, pending"),
    (scenario({"t": 0, "step": "register", "retruns": None}), "unknown key 'retruns'"),
    (scenario({"t": 0, "step": "claim", "actor": "A", "returns": True}), "'returns' of a claim step must be"),
    (scenario({"t": 0, "step": "register", "state": "finished"}), "'state' must be one of pending"),
    (scenario({"t": 0, "step": "register", "generation": -1}), "'generation' must be an integer of 0 or more"),
    (scenario({"t": 0, "step": "claim", "actor": "A", "lease": 0}), "'lease' must be a positive number"),
    (scenario(final_ledger_actions="2"), "'final_ledger_actions' must be an integer"),
    # issue 34: what tracebacked once (RecursionError; OverflowError in math.isfinite), one line now
    ("[" * 100_000, "nested too deeply to read"),
    ('{"scenarios": [{"id": "S", "title": "x", "steps": [{"t": 1' + "0" * 400 + ', "step": "register"}]}]}',
     "'t' must be a number (the logical clock), got 1000000"),
    ('{"scenarios": [{"id": "S", "title": "x", "steps": [{"t": 1' + "0" * 5000 + ', "step": "register"}]}]}',
     "Exceeds the limit (4300 digits)"),
    (scenario({"t": 0, "step": "register", "actor": ["x" * 10_000]}), "'actor' must be text or null"),
    (scenario({"t": 0, "step": "claim", "actor": "A", "returns": "y" * 10_000}), "'returns' of a claim step"),
    # scenarios of several tasks (issue 36)
    (scenario(tasks="t1"), "'tasks' must be a list of distinct non-empty task ids"),
    (scenario(tasks=["t1", "t1"]), "'tasks' must be a list of distinct non-empty task ids"),
    (scenario({"t": 0, "step": "register", "task": "t3"}, tasks=["t1", "t2"]),
     "step 1: task 't3' is not one of the scenario's (t1, t2, task): name it in 'tasks'"),
    (scenario({"t": 0, "step": "register", "task": 7}), "'task' must be a non-empty task id, got 7"),
    (scenario({"t": 0, "step": "exit_and_reopen", "task": "t1"}), "the exit_and_reopen step acts on no task"),
    (scenario({"t": 0, "step": "register", "snapshot": {"task": ["pending", 0]}}),
     "'snapshot' must be {task: [state, generation, lease_until]}"),
    (scenario({"t": 0, "step": "register", "snapshot": {"t9": ["pending", 0, None]}}),
     "task 't9' is not one of the scenario's (task)"),
])
def test_a_malformed_file_is_one_line_and_exit_2(tmp_path, capsys, content, words):
    path = write(tmp_path, content)
    rc, out, err = run_cli(["scenarios", "--file", str(path)], capsys)
    assert rc == ExitCode.USAGE and out == ""
    assert err.count("\n") == 1 and err.startswith("takeover: error: ") and str(path) in err, err
    assert words in err, err
    assert "Traceback" not in err and len(err) < 400, err  # a bad value is quoted cut short


def test_a_missing_or_binary_file_is_one_line(tmp_path, capsys):
    rc, _, err = run_cli(["scenarios", "--file", str(tmp_path / "none.json")], capsys)
    assert rc == ExitCode.USAGE and err.count("\n") == 1 and "cannot read scenario file" in err
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\xff\xfe\x00")
    rc, _, err = run_cli(["scenarios", "--file", str(binary)], capsys)
    assert rc == ExitCode.USAGE and err.count("\n") == 1 and "not a text file" in err


def test_an_unknown_scenario_id_of_the_file(tmp_path, capsys):
    path = write(tmp_path, OWN)
    rc, _, err = run_cli(["scenarios", "--file", str(path), "--scenario", "S1"], capsys)
    assert rc == ExitCode.USAGE and "unknown scenario 'S1'; choose from heartbeat, retry" in err
