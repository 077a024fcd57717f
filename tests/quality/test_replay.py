"""`takeover replay` on every planted bug: the violation comes back in one process, every time,
shrinks to a handful of steps, and the scenario it writes fails on the buggy queue and passes on
the reference queue.

Why hand-written histories: each is what its planted queue answered in a real run, cut down to the
task that broke (tests/quality/builder.py writes a real run folder), so the test needs no stress run
and still replays the real planted queue on a real SQLite file. The stored real runs of
tests/fixtures/runs are replayed too. Bugs a one-process replay cannot show (two claims racing, a
task passed over among others) must be reported as not reproduced, with the reason, never as
reproduced. Malformed scenario files are tests/unit/test_scenario_file.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from takeover._internal.replay.core import replay_run
from takeover._internal.replay.output import report_json, scenarios_doc, write_outputs
from takeover._internal.scenario.file import load_scenario_file
from takeover._internal.scenario.replay import run_scenarios
from takeover.cli import main
from takeover.contract import REFERENCE_QUEUE
from takeover.exit_codes import ExitCode
from takeover.queues.planted import PLANTED
from tests.quality.builder import Run

FIXTURE_RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
HANDFUL = 6  # the most steps a shrunk scenario may have


def _run(*workers: str) -> Run:
    r = Run()
    for p, w in enumerate(workers, start=1):
        r.spawn(p, w)
    return r


def _finish(r: Run, p: int, t: float, task: str, gen: int, **kw: object) -> None:
    """A worker's finish with its action just before (a task finished without one is a finding of
    its own: the worker's, not the queue's)."""
    r.action(p, t - 0.2, task, gen)
    r.finish(p, t, task, gen, **kw)  # type: ignore[arg-type]


def claim(p: int, t: float, gen: int, **kw: object) -> tuple:
    return ("claim", p, t, gen, kw)


def finish(p: int, t: float, gen: int, **kw: object) -> tuple:
    return ("finish", p, t, gen, kw)


def reregister(p: int, t: float) -> tuple:
    return ("register", p, t, None, {})


def history(*ops: tuple, snap: tuple, task: str = "a") -> Callable[[], Run]:
    """One task's history as the planted queue answered it (builder records, lease 5)."""
    def build() -> Run:
        r = _run("w1", "w2")
        r.register(task)
        for kind, p, t, gen, kw in ops:
            if kind == "claim":
                r.claim(p, t, task, gen, **kw)
            elif kind == "finish":
                _finish(r, p, t, task, gen, **kw)
            else:
                r.reregister(t, p, task)
        r.snap((task, *snap))
        return r
    return build


# Each is what its planted queue answered, in a real run, to the task that broke.
stale_finish = history(claim(1, 0, 1), claim(2, 6, 2), finish(1, 7, 1), snap=("done", 2, None))
late_finish = history(claim(1, 0, 1), finish(1, 6, 1), snap=("done", 1, None))  # its lease ended at 5
reclaimed_after_done = history(claim(1, 0, 1), finish(1, 2, 1), claim(2, 10, 2), snap=("running", 2, 15.0))
takeover_same_generation = history(claim(1, 0, 1), claim(2, 6, 1), finish(2, 7, 1), snap=("done", 1, None))
generation_two_first = history(claim(1, 0, 2), finish(1, 1, 2), snap=("done", 2, None))
# w1's lease runs until 5; the queue counts it expired from 2.5 on
lease_stolen = history(claim(1, 0, 1), claim(2, 3, 2), finish(2, 4, 2), snap=("done", 2, None))
# the stale holder is told True for a task already done
finished_twice = history(claim(1, 0, 1), claim(2, 6, 2), finish(2, 7, 2), finish(1, 8, 1), snap=("done", 2, None))
# FinishNotDurable loses the finish of ids whose crc32 is a multiple of 4, as "d"'s is
finish_lost = history(claim(1, 0, 1), finish(1, 2, 1), snap=("running", 1, 5.0), task="d")
snapshot_behind = history(claim(1, 0, 1), finish(1, 2, 1), snap=("done", 0, None))
# register is an upsert: a done task is pending at generation 0 again and handed out as generation 1
reregistered_and_reclaimed = history(claim(1, 0, 1), finish(1, 2, 1), reregister(0, 3), claim(2, 4, 1),
                                     finish(2, 5, 1), snap=("done", 1, None))
# both claims in flight at once, and both took the task
claims_race = history(claim(1, 0, 1, done=0.3), claim(2, 0.1, 2, done=0.2), finish(2, 1, 2),
                      finish(1, 1.5, 1, status="rejected"), snap=("done", 2, None))


def passed_over() -> Run:
    r = _run("w1")
    r.register("a", "b", "c", "d", "e")  # e is the fifth row: DropsTasks never hands out rowid 5
    for n, task in enumerate("abcd"):
        r.claim(1, 1 + n, task, 1)
        _finish(r, 1, 1.5 + n, task, 1)
    r.claim(1, 6, None, status="empty")
    r.snap(*((t, "done", 1, None) for t in "abcd"), ("e", "pending", 0, None))
    return r


# name -> (history, invariants the replay must reproduce); None: not reproducible in one process.
REPRODUCIBLE: dict[str, tuple[Callable[[], Run], set[str]]] = {
    "FinishIgnoresGeneration": (stale_finish, {"no_stale_commit"}),
    "FinishIgnoresLease": (late_finish, {"finish_within_lease"}),
    "ReclaimsTerminal": (reclaimed_after_done, {"no_reclaim_after_terminal"}),
    "NoBumpOnTakeover": (takeover_same_generation, {"generation_monotonic"}),
    "BumpsByTwo": (generation_two_first, {"generation_monotonic"}),
    "StealsLiveLeases": (lease_stolen, {"lease_exclusive"}),
    "IdempotentFinish": (finished_twice, {"single_finish"}),
    "FinishNotDurable": (finish_lost, {"state_matches_history"}),
    "SnapshotOffByOne": (snapshot_behind, {"state_matches_history"}),
    "RegisterReplaces": (reregistered_and_reclaimed, {"no_reclaim_after_terminal", "generation_monotonic"}),
}
# name -> (history, invariant, words the reason must give)
NOT_IN_ONE_PROCESS: dict[str, tuple[Callable[[], Run], str, str]] = {
    "NonAtomicClaim": (claims_race, "lease_exclusive", "in flight at the same time"),
    "DropsTasks": (passed_over, "no_lost_task", "other tasks of its table"),
}


def test_every_planted_bug_is_covered():
    assert set(REPRODUCIBLE) | set(NOT_IN_ONE_PROCESS) == set(PLANTED)


def _folder(tmp_path: Path, name: str, build: Callable[[], Run]) -> Path:
    return build().write(tmp_path / name, config={"queue": f"takeover.queues.planted:{name}"})


@pytest.mark.parametrize("name", sorted(REPRODUCIBLE))
def test_replay_reproduces_shrinks_and_writes_a_scenario_that_fails_until_fixed(tmp_path, name):
    build, wanted = REPRODUCIBLE[name]
    folder = _folder(tmp_path, name, build)
    # The checker flags the hand-written history as the real run of this bug was flagged.
    report = replay_run(folder)
    [tr] = report.tasks
    assert wanted <= set(tr.flagged), tr.flagged
    assert wanted <= set(tr.reproduced), (tr.reproduced, tr.reasons)
    for inv in wanted:
        sh = tr.shrunk[inv]
        assert 2 <= len(sh.steps) <= HANDFUL, sh.steps
        assert sh.outcome.breaks(inv)
        assert tr.repeats[inv] == (10, 10)
        assert all(float(st["t"]).is_integer() for st in sh.steps), sh.steps
        assert sh.steps[0]["step"] == "register"
    scenario_file, _test, _ids = write_outputs(report, tmp_path / "replay.json")
    doc = load_scenario_file(scenario_file)
    assert doc["queue"] == f"takeover.queues.planted:{name}"
    buggy = run_scenarios(doc["queue"], doc=doc)
    assert buggy and not any(r.ok for r in buggy), [r.failures() for r in buggy]
    reference = run_scenarios(REFERENCE_QUEUE, doc=doc)
    assert all(r.ok for r in reference), [r.failures() for r in reference]


def test_a_passing_row_of_a_replayed_scenario_does_not_say_the_queue_departed(tmp_path, capsys):
    """The row where the buggy queue broke the promise passes on the fix: its why names the invariant
    and the queue that answered wrong, in the past, never "departed here" beside an ok."""
    folder = _folder(tmp_path, "FinishIgnoresLease", late_finish)
    assert main(["replay", str(folder), "--out", str(tmp_path / "s.json")]) == ExitCode.VIOLATED
    capsys.readouterr()
    doc = load_scenario_file(tmp_path / "s.json")
    whys = [st["why"]["en"] for sc in doc["scenarios"] for st in sc["steps"] if st["why"]["en"]]
    assert whys and all(w.startswith("checks finish_within_lease: replaying FinishIgnoresLease, "
                                     "FinishIgnoresLease answered this step wrong (") for w in whys), whys
    for queue, rc in ((REFERENCE_QUEUE, ExitCode.VALID), ("takeover.queues.planted:FinishIgnoresLease",
                                                         ExitCode.VIOLATED)):
        assert main(["scenarios", "--file", str(tmp_path / "s.json"), "--queue", queue]) == rc
        out = " ".join(capsys.readouterr().out.split())
        assert "departed" not in out and "answered this step wrong" in out


@pytest.mark.slow
def test_the_same_answer_every_time(tmp_path):
    """Every planted bug's replay, from the run folder to the scenario file, three times over: one
    answer (each shrunk scenario is also replayed 10 more times inside every run, asserted above)."""
    for name, (build, _wanted) in sorted(REPRODUCIBLE.items()):
        folder = _folder(tmp_path, name, build)
        first = replay_run(folder)
        want = (report_json(first, {}, None), scenarios_doc(first)[0])
        for _ in range(2):
            again = replay_run(folder)
            assert (report_json(again, {}, None), scenarios_doc(again)[0]) == want, name


@pytest.mark.parametrize("name", sorted(NOT_IN_ONE_PROCESS))
def test_a_bug_one_process_cannot_show_is_reported_with_its_reason(tmp_path, name, capsys):
    build, invariant, reason = NOT_IN_ONE_PROCESS[name]
    folder = _folder(tmp_path, name, build)
    report = replay_run(folder)
    [tr] = report.tasks
    assert invariant in tr.flagged
    assert invariant in tr.missed and not tr.reproduced and not tr.shrunk
    assert reason in tr.reasons[invariant]
    assert main(["replay", str(folder)]) == ExitCode.INCONCLUSIVE
    out = capsys.readouterr().out
    assert f"NOT reproduced {invariant}" in out and reason in out
    assert not (folder / "replay.json").exists()  # nothing shrunk, no scenario to keep


def test_an_indeterminate_finish_is_tried_both_ways(tmp_path):
    """The stale finish was killed mid-call, so the checker can only tell that the final state does
    not follow; the replay must place the finish (it may have happened) to show why, and say so:
    left out, the queue answers everything correctly."""
    build = history(claim(1, 0, 1), claim(2, 6, 2), finish(1, 7, 1, status="open"),
                    finish(2, 8, 2, status="rejected"), snap=("done", 2, None))  # the holder is refused
    folder = _folder(tmp_path, "FinishIgnoresGeneration", build)
    [tr] = replay_run(folder).tasks
    assert len(tr.calls.indeterminate) == 1
    assert tr.flagged == ["state_matches_history"] and tr.reproduced == ["state_matches_history"]
    assert tr.variant is not None and tr.variant.endswith("indeterminate calls: all")
    assert tr.outcome is not None and tr.outcome.breaks("no_stale_commit")
    assert tr.matched == (3, 3)  # every recorded answer, the holder's refusal included, came back


@pytest.mark.parametrize("name", sorted(REPRODUCIBLE))
def test_every_planted_bugs_fix_replays_clean_and_is_fixed(tmp_path, name):
    """A fix is checked against the failing sequences: on the reference queue (every planted bug's
    fix) the same calls break nothing, in every placement, and that is FIXED."""
    build, wanted = REPRODUCIBLE[name]
    report = replay_run(_folder(tmp_path, name, build), queue=REFERENCE_QUEUE)
    [tr] = report.tasks
    assert wanted <= set(tr.missed) and not tr.reproduced and tr.clean and not tr.beyond, tr.reasons
    assert report.fixed and not report.own_queue


def test_a_fixed_queue_says_fixed_exit_0_and_what_that_proves(tmp_path, capsys):
    """FIXED, exit 0, with what it proves and what it does not (a one-task replay shows no race)."""
    folder = _folder(tmp_path, "FinishIgnoresLease", late_finish)
    rc = main(["replay", str(folder), "--queue", REFERENCE_QUEUE, "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == ExitCode.VALID and doc["fixed"] is True
    [task] = doc["tasks"]
    assert task["reproduced"] == [] and "finish_within_lease" in task["not_reproduced"]
    assert task["departures"] == []
    assert main(["replay", str(folder), "--queue", REFERENCE_QUEUE]) == ExitCode.VALID
    out = capsys.readouterr().out
    assert f"FIXED on {REFERENCE_QUEUE}" in out and "NOT reproduced" not in out
    assert "not broken here finish_within_lease" in out
    assert "does not prove the queue correct" in out and "races" in out
    assert f"takeover stress --queue {REFERENCE_QUEUE}" in out


HALF_FIX = """from takeover.queues.planted import _Planted


class GraceFinish(_Planted):
    # 'fixed' by a grace of 0.5 s: the run's finish, 1 s late, is refused; one at the lease's end is not
    FINISH = ("UPDATE tasks SET state = ?, lease_until = NULL "
              "WHERE task_id = ? AND generation = ? AND state = 'running' AND ? < lease_until + 0.5")
"""


def test_a_fix_that_fails_the_shrunk_boundary_scenario_is_not_fixed(tmp_path, capsys, monkeypatch):
    """The recorded calls are only near the boundary; the scenario an earlier replay shrank sits on it
    (a finish exactly at the lease's end). A fix that passes the first and not the second is NOT FIXED
    (exit 1, the failing scenario named); the real fix passes both and the report says so."""
    folder = _folder(tmp_path, "FinishIgnoresLease", late_finish)
    assert main(["replay", str(folder)]) == ExitCode.VIOLATED  # writes RUN/replay.json
    capsys.readouterr()
    (tmp_path / "half_fix.py").write_text(HALF_FIX)
    monkeypatch.syspath_prepend(str(tmp_path))
    report = replay_run(folder, queue="half_fix:GraceFinish")
    assert report.fixed and report.tasks[0].clean  # on the recorded calls alone it would be FIXED
    assert main(["replay", str(folder), "--queue", "half_fix:GraceFinish", "--json"]) == ExitCode.VIOLATED
    doc = json.loads(capsys.readouterr().out)
    assert doc["fixed"] is False and doc["saved_scenarios"]["failed"][0].startswith("finish_within_lease: ")
    assert main(["replay", str(folder), "--queue", "half_fix:GraceFinish"]) == ExitCode.VIOLATED
    out = capsys.readouterr().out
    assert "NOT FIXED: the run's calls replay clean on half_fix:GraceFinish, but 1 of the shrunk" in out
    assert "FIXED on" not in out
    assert main(["replay", str(folder), "--queue", REFERENCE_QUEUE]) == ExitCode.VALID
    out = " ".join(capsys.readouterr().out.split())
    assert f"The shrunk scenario(s) of {folder / 'replay.json'} pass on it too: finish_within_lease." in out


def test_the_runs_own_queue_named_again_is_never_fixed(tmp_path, capsys):
    """--queue naming the queue the run recorded is the run's own queue: it reproduces (exit 1), and a
    violation that does not come back there is NOT REPRODUCED (exit 3), never FIXED."""
    folder = _folder(tmp_path, "FinishIgnoresLease", late_finish)
    assert main(["replay", str(folder), "--queue", "takeover.queues.planted:FinishIgnoresLease",
                 "--out", str(tmp_path / "s.json")]) == ExitCode.VIOLATED
    assert "REPRODUCED in one process" in capsys.readouterr().out
    folder = _folder(tmp_path, "NonAtomicClaim", claims_race)
    assert main(["replay", str(folder), "--queue", "takeover.queues.planted:NonAtomicClaim"]) == ExitCode.INCONCLUSIVE
    out = capsys.readouterr().out
    assert "NOT REPRODUCED" in out and "FIXED" not in out


@pytest.mark.parametrize("name", sorted(NOT_IN_ONE_PROCESS))
def test_a_violation_one_process_cannot_judge_is_not_fixed_on_another_queue(tmp_path, capsys, name):
    """A race, or a task passed over among others, replays clean on any queue: that is no evidence of
    a fix, so the reference queue is not called FIXED there (exit 3), and the report says why."""
    build, invariant, reason = NOT_IN_ONE_PROCESS[name]
    folder = _folder(tmp_path, name, build)
    report = replay_run(folder, queue=REFERENCE_QUEUE)
    [tr] = report.tasks
    assert tr.beyond == [invariant] and not report.fixed
    assert main(["replay", str(folder), "--queue", REFERENCE_QUEUE]) == ExitCode.INCONCLUSIVE
    out = capsys.readouterr().out
    assert "NOT REPRODUCED" in out and f"Not FIXED either: a one-task replay cannot judge {invariant}" in out
    assert "FIXED on" not in out


@pytest.mark.parametrize("run_name, invariant", [("planted-finish-ignores-generation", "no_stale_commit"),
                                                  ("planted-steals", "lease_exclusive")])
def test_stored_real_runs_reproduce(tmp_path, capsys, run_name, invariant):
    out = tmp_path / "scenarios.json"
    rc = main(["replay", str(FIXTURE_RUNS / run_name), "--out", str(out), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == ExitCode.VIOLATED
    flagged = [t for t in doc["tasks"] if invariant in t["flagged"]]
    assert flagged and all(invariant in t["reproduced"] for t in flagged)
    shrunk = [t["shrunk"][invariant] for t in flagged if invariant in t.get("shrunk", {})]
    assert shrunk and all(s["steps"] <= HANDFUL and s["broke"] == [10, 10] for s in shrunk)
    assert doc["scenario_file"] == str(out) and out.with_name("test_scenarios.py").is_file()
    assert main(["scenarios", "--file", str(out)]) == ExitCode.VIOLATED
    assert main(["scenarios", "--file", str(out), "--queue", REFERENCE_QUEUE]) == ExitCode.VALID
    capsys.readouterr()


def test_a_named_task_that_broke_nothing_replays_clean(tmp_path, capsys):
    folder = _folder(tmp_path, "FinishIgnoresGeneration", history(claim(1, 0, 1), finish(1, 2, 1),
                                                                  snap=("done", 1, None)))
    assert main(["replay", str(folder)]) == ExitCode.VALID
    assert "Nothing to replay" in capsys.readouterr().out
    assert main(["replay", str(folder), "--task", "a"]) == ExitCode.VALID
    assert "the queue answers every call as the spec says" in capsys.readouterr().out


@pytest.mark.parametrize("argv, words", [
    (["--task", "nope"], "task 'nope' is not in the run's history"),
    (["--queue", "no_such_module:Q"], "no_such_module"),
    (["--max-tasks", "0"], "--max-tasks"),
])
def test_bad_input_is_one_line(tmp_path, capsys, argv, words):
    folder = _folder(tmp_path, "FinishIgnoresLease", late_finish)
    assert main(["replay", str(folder), *argv]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err and "Traceback" not in err


def test_not_a_run_folder(tmp_path, capsys):
    assert main(["replay", str(tmp_path / "missing")]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_a_heartbeat_run_replays_every_answer_as_recorded(capsys):
    """Heartbeats (extend) are replayed too, on the run's clock: on the reference queue every one of
    the task's recorded answers comes back, new leases included, and nothing departs."""
    run = FIXTURE_RUNS / "ref-heartbeat-key"  # its config names the queue by its old harness. name
    assert main(["replay", str(run), "--task", "t000000", "--json"]) == ExitCode.VALID
    [task] = json.loads(capsys.readouterr().out)["tasks"]
    assert task["calls"] == 11 and task["recorded_answers_matched"] == [10, 10]
    assert task["departures"] == [] and task["reproduced"] == []
