"""What ``takeover explore`` prints about a departure (issue 36): the operation, the queue's answer and the
spec's, what differs when the answer itself was right (with every digit needed to see it), "spec" never
told as an invariant, and the departure's task found where its words name it (not the last task a step
acted on)."""

from __future__ import annotations

from pathlib import Path

from takeover._internal.explorer.calls import Failure, Step
from takeover._internal.explorer.core import ExploreResult, candidate_tasks
from takeover._internal.explorer.words import failure_lines, promise
from takeover._internal.replay.model import STATE_MATCHES, TaskState, snapshot_departure


def _result(steps: list[Step], invariants: tuple[str, ...], what: str) -> ExploreResult:
    return ExploreResult("q:Q", 1, 3, 10, 0.5, "sqlite", failure=Failure(steps, invariants, what, 2))


def _step(spec: dict, answered: str, expected: str, task: str | None, invariants: tuple[str, ...] = (),
          what: str = "") -> Step:
    return Step({"t": 0.0, "actor": None, **spec}, answered, expected, task, invariants, what)


def test_a_snapshot_that_differs_beyond_six_digits_shows_every_digit_and_the_field() -> None:
    s = TaskState(state="running", generation=1, lease_until=1.0009765625)
    said = snapshot_departure(s, {"state": "running", "generation": 1, "lease_until": 1.00098})
    assert "1.00098," in said and "1.0009765625" in said, said
    assert said.endswith("(lease_until differs)"), said
    gen = snapshot_departure(s, {"state": "running", "generation": 2, "lease_until": 1.0009765625})
    assert "lease_until 1.00098" in gen and gen.endswith("(generation differs)"), gen


def test_an_answer_the_spec_gives_is_not_told_as_the_departure() -> None:
    """The extend's answer was the spec's; the snapshot after it was not: the lines say so, never "the queue
    answered X; the spec says X"."""
    what = "task t1: snapshot shows running / generation 1 / lease_until 1.0009775625, but the answers imply ..."
    steps = [_step({"step": "register", "task": "t1"}, "nothing", "nothing", "t1"),
             _step({"step": "extend", "actor": "A", "task": "t1", "with_generation": 1}, "1.0009765625",
                   "1.0009765625", "t1", (STATE_MATCHES,), what)]
    text = "\n".join(failure_lines(_result(steps, (STATE_MATCHES,), what)))
    assert "the queue answered 1.0009765625; the spec says 1.0009765625" not in text
    assert "step 2, A extend t1 with generation 1: the queue answered 1.0009765625, as the spec says; the snapshot " \
           "read after it does not show it" in text
    assert f"breaks {STATE_MATCHES}: {what}" in text


def test_spec_is_never_told_as_an_invariant() -> None:
    steps = [_step({"step": "finish", "actor": "A", "task": "t1", "outcome": "done", "with_generation": 1},
                   "1", "True", "t1", ("spec",), "finish returned 1, not a bool")]
    text = "\n".join(failure_lines(_result(steps, ("spec",), "finish returned 1, not a bool")))
    assert "DEPARTED from the spec: a wrong answer to finish (shrunk to 1 step(s), 1 task(s))" in text
    assert ": spec" not in text and "breaks spec" not in text
    assert "step 1, A finish t1 done with generation 1: the queue answered 1; the spec says True" in text
    assert promise(("lease_exclusive", "spec")) == "breaks lease_exclusive"


def test_the_departing_task_is_the_one_the_departure_names() -> None:
    """A claim that came back empty while t2 was claimable departs about t2, though the last step that
    acted on a task acted on t1 (issue 36: "task t1's steps alone break nothing", and no scenario file)."""
    steps = [_step({"step": "register", "task": "t2"}, "nothing", "nothing", "t2"),
             _step({"step": "register", "task": "t1"}, "nothing", "nothing", "t1"),
             _step({"step": "claim", "actor": "A"}, "task t1, generation 1, lease until t=1",
                   "task t1, generation 1, lease until t=1 or task t2, generation 1, lease until t=1", "t1"),
             _step({"step": "finish", "actor": "A", "task": "t1", "outcome": "done", "with_generation": 1},
                   "True", "True", "t1"),
             _step({"step": "claim", "actor": "B"}, "None", "task t2, generation 1, lease until t=1", None,
                   ("no_lost_task",), "claim answered None while task t2 was claimable")]
    failure = Failure(steps, ("no_lost_task",), "claim answered None while task t2 was claimable", 2)
    assert candidate_tasks(failure)[0] == "t2"
    assert set(candidate_tasks(failure)) == {"t1", "t2"}


def test_a_departure_with_no_scenario_file_says_which_tasks_were_tried(tmp_path: Path) -> None:
    from takeover._internal.explorer.core import Written

    steps = [_step({"step": "claim", "actor": "A"}, "None", "task t2, generation 1, lease until t=1", None,
                   ("no_lost_task",), "claim answered None while task t2 was claimable")]
    result = _result(steps, ("no_lost_task",), "x")
    result.written = Written("t2", None, "no one task's steps alone break no_lost_task (each task's alone breaks: "
                                         "t2: nothing; t1: nothing): the departure needs several tasks at once")
    text = "\n".join(failure_lines(result))
    assert "No scenario file: no one task's steps alone break no_lost_task (each task's alone breaks: t2" in text


def test_two_calls_at_once_are_told_as_a_pair() -> None:
    steps = [_step({"step": "register", "task": "t1"}, "nothing", "nothing", "t1"),
             _step({"step": "claim", "actor": "A", "pause_before_statement": 2}, "task t1, generation 1",
                   "task t1, generation 1", "t1"),
             _step({"step": "claim", "actor": "B"}, "task t1, generation 1", "task t1, generation 1", "t1"),
             _step({"step": "resume", "actor": "A"}, "nothing", "nothing", None, ("lease_exclusive",),
                   "claim at t=0 granted a lease while generation 1's ran until t=1")]
    text = "\n".join(failure_lines(_result(steps, ("lease_exclusive",), "x")))
    assert "step 4, A the paused call resumes: the two calls at once (steps 2 and 3) answered as above" in text
    assert "as the spec says" not in text
