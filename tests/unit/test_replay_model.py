"""The spec's model behind `takeover replay` (takeover._internal.replay.model): its expected answers are the
spec's own tables, value for value, and a wrong answer is named by the invariant it breaks.

Why against the spec's tables: the scenario files the replay writes take every expected value from
this model, so a model that disagreed with the spec would write tests that fail correct queues.
The replay itself, on real queues, is tests/quality/test_replay.py.
"""

from __future__ import annotations

import pytest

from takeover._internal.replay.model import (
    TaskState,
    apply,
    claim_departures,
    claimable_tasks,
    expected_steps,
    snapshot_departure,
    snapshot_departures,
    step_departures,
)
from takeover._internal.scenario.replay import load_spec
from takeover._internal.scenario.results import OBSERVED_KEYS

SPEC = load_spec()


@pytest.mark.parametrize("scenario", SPEC["scenarios"], ids=lambda s: s["id"])
def test_the_model_answers_every_spec_step_as_the_spec_does(scenario):
    inputs = [{k: v for k, v in st.items() if k not in OBSERVED_KEYS} for st in scenario["steps"]]
    got = expected_steps(inputs, float(SPEC["lease_seconds"]))
    for want, mine in zip(scenario["steps"], got, strict=True):
        for key in OBSERVED_KEYS:
            if key in want:
                assert mine[key] == want[key] and type(mine[key]) is type(want[key]), (scenario["id"], want, key)


def _walk(lease: float, *steps_and_answers: tuple[dict, object]) -> tuple[TaskState, list[list[str]]]:
    s = TaskState()
    found = []
    for step, answer in steps_and_answers:
        names, _words = step_departures(s, step, answer, lease)
        s = apply(s, step, answer)
        found.append(names)
    return s, found


REGISTER = {"t": 0, "step": "register", "actor": None}


def claim(t: float, actor: str = "A") -> dict:
    return {"t": t, "step": "claim", "actor": actor}


def finish(t: float, gen: int, outcome: str = "done") -> dict:
    return {"t": t, "step": "finish", "actor": "A", "outcome": outcome, "with_generation": gen}


@pytest.mark.parametrize("answers, step_no, invariants", [
    # a stale holder's finish accepted after a takeover: stale, and after its own lease
    ([(REGISTER, None), (claim(0), (1, 1.0)), (claim(1, "B"), (2, 2.0)), (finish(1, 1), True)], 3,
     {"no_stale_commit", "finish_within_lease"}),
    # a finish after the lease, nobody took over
    ([(REGISTER, None), (claim(0), (1, 1.0)), (finish(2, 1), True)], 2, {"finish_within_lease"}),
    # a done task handed out again, then finished again
    ([(REGISTER, None), (claim(0), (1, 1.0)), (finish(0, 1), True), (claim(2), (2, 3.0))], 3,
     {"no_reclaim_after_terminal"}),
    # a takeover that keeps the generation; a first claim that skips one
    ([(REGISTER, None), (claim(0), (1, 1.0)), (claim(1, "B"), (1, 2.0))], 2, {"generation_monotonic"}),
    ([(REGISTER, None), (claim(0), (2, 1.0))], 1, {"generation_monotonic"}),
    # a second lease while the first is valid
    ([(REGISTER, None), (claim(0), (1, 1.0)), (claim(0.5, "B"), (2, 1.5))], 2, {"lease_exclusive"}),
    # a pending task the queue does not hand out
    ([(REGISTER, None), (claim(0), None)], 1, {"no_lost_task"}),
    # a valid finish refused: a departure no invariant names
    ([(REGISTER, None), (claim(0), (1, 1.0)), (finish(0.5, 1), False)], 2, {"spec"}),
])
def test_a_wrong_answer_is_named_by_the_invariant_it_breaks(answers, step_no, invariants):
    _s, found = _walk(1.0, *answers)
    assert set(found[step_no]) == invariants
    assert not any(found[:step_no]), found


def test_a_second_finish_after_a_reclaim_is_single_finish():
    """Following the queue's own answers the reclaimed task's finish is valid; it is still the
    task's second finish, as the checker counts it."""
    _s, found = _walk(1.0, (REGISTER, None), (claim(0), (1, 1.0)), (finish(0, 1), True), (claim(2), (2, 3.0)),
                      (finish(2, 2), True))
    assert found == [[], [], [], ["no_reclaim_after_terminal"], ["single_finish"]]


def test_the_spec_answers_break_nothing():
    lease = 1.0
    steps = [REGISTER, claim(0), claim(0.5, "B"), claim(1, "B"), finish(1.5, 1), finish(1.6, 2),
             claim(5)]
    s, found = TaskState(), []
    for st in expected_steps(steps, lease):
        names, _ = step_departures(s, st, _full(st), lease)
        s = apply(s, st, _full(st))
        found.append(names)
        assert snapshot_departure(s, st) == ""
    assert found == [[]] * len(steps)
    assert (s.state, s.generation) == ("done", 2)


def _full(step: dict) -> object:
    if step["step"] == "claim" and step["returns"] is not None:
        return step["returns"], step["lease_until"]
    return step["returns"]


def test_a_snapshot_that_does_not_follow_from_the_answers():
    s, _ = _walk(1.0, (REGISTER, None), (claim(0), (1, 1.0)))
    assert snapshot_departure(s, {"state": "running", "generation": 1, "lease_until": 1.0}) == ""
    assert "generation 0" in snapshot_departure(s, {"state": "running", "generation": 0, "lease_until": 1.0})
    # terminal by the finish of an older generation: no accepted finish explains (done, 2)
    s, _ = _walk(1.0, (REGISTER, None), (claim(0), (1, 1.0)), (claim(1, "B"), (2, 2.0)), (finish(1, 1), True))
    assert "no accepted finish explains" in snapshot_departure(s, {"state": "done", "generation": 2,
                                                                   "lease_until": None})


# -- several tasks (takeover explore): any claimable task is a right answer, no other one ----------------------
def _tasks() -> dict[str, TaskState]:
    pending = apply(TaskState(), REGISTER, None)
    running = apply(pending, {"t": 0, "step": "claim", "actor": "A"}, (1, 1.0))
    done = apply(running, {"t": 0.5, "step": "finish", "outcome": "done", "with_generation": 1}, True)
    return {"p": pending, "r": running, "d": done}


@pytest.mark.parametrize("now, got, broken", [
    (0.5, ("p", 1, 1.5), []),                       # the pending one: right
    (1.0, ("r", 2, 2.0), []),                       # the expired one (lease_until <= now): right too
    (0.5, ("r", 2, 1.5), ["lease_exclusive"]),      # the running one inside its lease
    (0.5, ("d", 2, 1.5), ["no_reclaim_after_terminal"]),
    (0.5, ("x", 1, 1.5), ["spec"]),                 # a task never registered
    (0.5, ("p", 2, 1.5), ["generation_monotonic"]),
    (0.5, None, ["no_lost_task"]),                  # nothing, while p is pending
])
def test_a_claim_among_several_tasks_may_take_any_claimable_one_and_no_other(now, got, broken):
    names, words = claim_departures(_tasks(), {"t": now, "step": "claim", "actor": "B"}, got, 1.0)
    assert names == broken, words
    if broken and got is not None:
        assert words.startswith(f"task {got[0]}: ")


def test_a_claim_that_finds_nothing_claimable_may_come_back_empty():
    states = {k: s for k, s in _tasks().items() if k != "p"}
    assert claim_departures(states, {"t": 0.5, "step": "claim", "actor": "B"}, None, 1.0) == ([], "")
    assert claimable_tasks(states, 1.0) == ["r"]


def test_a_snapshot_of_several_tasks_must_show_each_as_the_answers_imply():
    states = _tasks()
    rows = [("p", "pending", 0, None), ("r", "running", 1, 1.0), ("d", "done", 1, None)]
    assert snapshot_departures(states, rows) == ""
    assert "task p: snapshot shows done" in snapshot_departures(states, [("p", "done", 0, None), *rows[1:]])
    assert "lists task d 0 times" in snapshot_departures(states, rows[:2])
    assert "task x, which was never registered" in snapshot_departures(states, [*rows, ("x", "pending", 0, None)])
