"""The spec's model of one task: what a correct queue answers to each step, and which promise a
different answer breaks.

Why a model of its own and not the reference queue: the expected answers of a regression scenario
must come from the spec, not from another implementation that might share the bug. The model is
the contract's text (``takeover.contract``) as a pure function of the previous state and the step;
``tests/unit/test_replay_model.py`` holds it to the spec's five scenarios, value for value.

One transition function serves two purposes:

* fed its *own* answers (:func:`expected_steps`), it gives the values a correct queue must show at
  every step: what a scenario file expects;
* fed the *queue's* answers (:func:`judge`), it gives, at every step, what a correct queue would
  answer given everything the queue said before, which is how the checker judges a history: a
  departure is then named by the invariant it breaks (a finish accepted for a superseded generation
  is ``no_stale_commit``, a second lease while one is valid ``lease_exclusive``), and one wrong
  answer does not make every later step look wrong.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from takeover.contract import TERMINAL_STATES

# The invariant names of the checker (takeover._internal.checker.invariants), as the replay reports them.
NO_STALE_COMMIT = "no_stale_commit"
FINISH_WITHIN_LEASE = "finish_within_lease"
NO_RECLAIM = "no_reclaim_after_terminal"
GENERATION_MONOTONIC = "generation_monotonic"
LEASE_EXCLUSIVE = "lease_exclusive"
SINGLE_FINISH = "single_finish"
STATE_MATCHES = "state_matches_history"
NO_LOST_TASK = "no_lost_task"
# A departure from the spec that no invariant names (a valid finish refused, a lease of the wrong
# length, an exception): still a departure, shown as such.
SPEC = "spec"
LEASE_TOLERANCE = 1e-6  # seconds: two lease ends this close are the same (a library's rounding)


@dataclass(frozen=True)
class TaskState:
    """One task as the spec sees it; ``state`` None until it is registered."""

    state: str | None = None
    generation: int | None = None  # the latest generation a claim was given
    lease_until: float | None = None
    performed: int = 0  # side effects the external service performed for it (the ledger)
    leases: tuple[tuple[int, float], ...] = ()  # (generation, lease_until) of every lease given, latest last
    # (generation, outcome) of every finish the queue accepted since the task was last reopened (a
    # resolve back to pending): what can explain a terminal snapshot, and what a second one repeats.
    finishes: tuple[tuple[int, str], ...] = ()

    def claimable(self, now: float) -> bool:
        return self.state == "pending" or (
            self.state == "running" and self.lease_until is not None and self.lease_until <= now)

    def holds(self, generation: int, now: float) -> bool:
        """Whether ``generation`` holds a valid lease at ``now``: what finish and extend require."""
        return (self.state == "running" and generation == self.generation
                and self.lease_until is not None and now < self.lease_until)

    def lease_of_generation(self, generation: int) -> float | None:
        """The lease ``generation`` was given last (by its claim or a heartbeat), None if never."""
        return next((until for gen, until in reversed(self.leases) if gen == generation), None)


def lease_of(step: dict[str, Any], lease: float) -> float:
    return float(step.get("lease", lease))


def expect(s: TaskState, step: dict[str, Any], lease: float) -> Any:
    """What a correct queue returns for ``step`` in state ``s`` (the scenario's ``returns``; a claim's
    full answer is ``(generation, lease_until)`` here)."""
    kind, now = step["step"], float(step["t"])
    if kind == "claim":
        if s.state is None or not s.claimable(now):
            return None
        return (s.generation or 0) + 1, now + lease_of(step, lease)
    if kind == "finish":
        return s.holds(step["with_generation"], now)
    if kind == "extend":
        if not s.holds(step["with_generation"], now):
            return None
        return max(float(s.lease_until or 0.0), now + lease_of(step, lease))
    if kind == "resolve":
        return s.state == "uncertain" and step["with_generation"] == s.generation
    if kind == "external_action":
        return "timeout" if step.get("response_lost") else s.performed + 1
    return None  # register, exit_and_reopen


def apply(s: TaskState, step: dict[str, Any], answer: Any) -> TaskState:
    """The state after ``step`` answered ``answer``: what the answers so far imply."""
    kind = step["step"]
    if kind == "register":
        return s if s.state is not None else replace(s, state="pending", generation=0, lease_until=None)
    if kind == "claim":
        if answer is None:
            return s
        generation, lease_until = answer
        return replace(s, state="running", generation=generation, lease_until=lease_until,
                       leases=(*s.leases, (generation, lease_until)))
    if kind == "finish":
        if answer is not True:
            return s
        return replace(s, state=step["outcome"], lease_until=None,
                       finishes=(*s.finishes, (step["with_generation"], step["outcome"])))
    if kind == "extend":
        if answer is None:
            return s
        lease = float(answer)
        current = step["with_generation"] == s.generation
        return replace(s, lease_until=lease if current else s.lease_until,
                       leases=(*s.leases, (step["with_generation"], lease)))
    if kind == "resolve":
        if answer is not True:
            return s
        finishes = ((*s.finishes, (step["with_generation"], "done")) if step["outcome"] == "done" else ())
        return replace(s, state=step["outcome"], lease_until=None, finishes=finishes)
    if kind == "external_action":
        return replace(s, performed=s.performed + 1)
    return s


def returns(kind: str, answer: Any) -> Any:
    """A full answer as the scenario's ``returns`` shows it (a claim shows its generation)."""
    if kind == "claim" and answer is not None:
        return answer[0]
    return answer


def expected_steps(steps: list[dict[str, Any]], lease: float) -> list[dict[str, Any]]:
    """``steps`` with what a correct queue must answer and show after each: returns, state,
    generation, lease_until (and ledger_actions after an external action). Two calls at once (a step
    with ``pause_before_statement``, the step in its gap, a ``resume``: takeover._internal.scenario.overlap) each
    answer, the paused one first; the resume step shows the snapshot after both, and ``gap_first``: what the other
    order answers and shows, which a correct queue may take when the two calls were under way at once."""
    s = TaskState()
    out: list[dict[str, Any]] = []
    before_pause = s
    for n, step in enumerate(steps):
        if "pause_before_statement" in step:
            before_pause = s
        if step["step"] == "resume" and n >= 2 and "pause_before_statement" in steps[n - 2]:
            out.append(dict(step, state=s.state, generation=s.generation, lease_until=s.lease_until,
                            gap_first=_gap_first(before_pause, steps[n - 2], steps[n - 1], lease)))
            continue
        answer = expect(s, step, lease)
        s = apply(s, step, answer)
        done = dict(step, returns=returns(step["step"], answer), state=s.state, generation=s.generation,
                    lease_until=s.lease_until)
        if step["step"] == "external_action":
            done["ledger_actions"] = s.performed
        if "pause_before_statement" in step or (n and "pause_before_statement" in steps[n - 1]):
            for key in ("state", "generation", "lease_until"):  # the snapshot is the resume step's, after both
                del done[key]
        out.append(done)
    return out


def _gap_first(s: TaskState, paused: dict[str, Any], gap: dict[str, Any], lease: float) -> dict[str, Any]:
    """What two calls at once answer and leave when the call in the gap takes effect first."""
    gap_answer = expect(s, gap, lease)
    middle = apply(s, gap, gap_answer)
    paused_answer = expect(middle, paused, lease)
    after = apply(middle, paused, paused_answer)
    return {"paused_returns": returns(paused["step"], paused_answer), "gap_returns": returns(gap["step"], gap_answer),
            "state": after.state, "generation": after.generation, "lease_until": after.lease_until}


def _claim_departure(s: TaskState, step: dict[str, Any], want: Any, got: Any) -> tuple[list[str], str]:
    now = float(step["t"])
    if got is None:
        return [NO_LOST_TASK], f"claim at t={now:g} returned None, but the task was {_describe(s, now)}"
    names: list[str] = []
    words: list[str] = []
    generation, lease_until = got
    if want is None:
        if s.state in TERMINAL_STATES:
            names.append(NO_RECLAIM)
            words.append(f"claim at t={now:g} handed out a task already {s.state}")
        elif s.state == "running":
            names.append(LEASE_EXCLUSIVE)
            words.append(f"claim at t={now:g} granted a lease while generation {s.generation}'s ran until "
                         f"t={_t(s.lease_until)}")
        else:
            names.append(SPEC)
            words.append(f"claim at t={now:g} returned a task that was {_describe(s, now)}")
    previous = s.generation or 0
    if generation != previous + 1:
        names.append(GENERATION_MONOTONIC)
        words.append(f"claim returned generation {generation} after generation {previous} (expected {previous + 1})")
    # Within a microsecond: a library that stores its clock in integer nanoseconds (litequeue) hands back
    # now + lease rounded to them, which is the same lease, not a departure.
    if want is not None and not math.isclose(lease_until, want[1], rel_tol=0.0, abs_tol=LEASE_TOLERANCE):
        names.append(SPEC)
        words.append(f"claim returned lease_until {_t(lease_until)}, expected {_t(want[1])} (now + lease)")
    return names, "; ".join(words)


def _finish_departure(s: TaskState, step: dict[str, Any], got: Any) -> tuple[list[str], str]:
    gen, now, kind = step["with_generation"], float(step["t"]), step["step"]
    if got is not True:
        return [SPEC], f"{kind} of generation {gen} at t={now:g} was refused, but it held a valid lease"
    names: list[str] = []
    words: list[str] = []
    if s.state in TERMINAL_STATES:
        names.append(SINGLE_FINISH)
        words.append(f"finish of generation {gen} at t={now:g} accepted although the task was already {s.state}")
    if s.generation is not None and gen < s.generation:
        names.append(NO_STALE_COMMIT)
        words.append(f"finish of generation {gen} at t={now:g} accepted after generation {s.generation} was claimed")
    own = s.lease_of_generation(gen)
    if own is None:
        names.append(FINISH_WITHIN_LEASE)
        words.append(f"finish of generation {gen} at t={now:g} accepted, but no claim was given that generation")
    elif now >= own:
        names.append(FINISH_WITHIN_LEASE)
        words.append(f"finish of generation {gen} at t={now:g} accepted after its lease ran out at t={_t(own)}")
    if not names:
        names.append(SPEC)
        words.append(f"finish of generation {gen} at t={now:g} accepted while the task was {_describe(s, now)}")
    return names, "; ".join(words)


def _t(value: float | None) -> str:
    return "none" if value is None else f"{value:g}"


def _describe(s: TaskState, now: float) -> str:
    if s.state is None:
        return "not registered"
    if s.state == "running":
        valid = "valid" if s.lease_until is not None and now < s.lease_until else "expired"
        return f"running at generation {s.generation} (lease until t={_t(s.lease_until)}, {valid})"
    return f"{s.state} at generation {s.generation}"


def step_departures(s: TaskState, step: dict[str, Any], answer: Any, lease: float) -> tuple[list[str], str]:
    """The invariants broken by answering ``answer`` to ``step`` in state ``s``, and the words for it
    (nothing when the answer is the spec's)."""
    want = expect(s, step, lease)
    kind = step["step"]
    if kind == "claim":
        if answer == want:
            return [], ""
        return _claim_departure(s, step, want, answer)
    if kind == "finish" and answer is True and s.finishes:
        # Accepted after another finish took effect: even where the model, following the queue's
        # own answers (a task handed out again), would accept it, one task finished twice.
        names, words = _finish_departure(s, step, answer) if answer != want else ([], "")
        if SINGLE_FINISH in names:  # already said: "accepted although the task was already done"
            return names, words
        gen, outcome = s.finishes[-1]
        more = f"a second finish accepted (generation {gen}'s {outcome} was accepted before)"
        return [SINGLE_FINISH, *[n for n in names if n != SPEC]], f"{words}; {more}" if words else more
    if kind in ("finish", "resolve"):
        if answer == want:
            return [], ""
        if kind == "resolve":
            verb = "accepted" if answer else "refused"
            return [SPEC], (f"resolve of generation {step['with_generation']} at t={float(step['t']):g} {verb} "
                            f"while the task was {_describe(s, float(step['t']))}")
        return _finish_departure(s, step, answer)
    if kind == "extend":
        if answer == want:
            return [], ""
        if answer is None:
            return [SPEC], f"extend of generation {step['with_generation']} was refused while its lease was valid"
        if want is None:
            return [SPEC], (f"extend of generation {step['with_generation']} at t={float(step['t']):g} "
                            f"moved a lease it did not hold (task {_describe(s, float(step['t']))})")
        return [SPEC], f"extend returned lease_until {_t(answer)}, expected {_t(want)}"
    return [], ""


def _same_lease_end(a: Any, b: Any) -> bool:
    """Two lease ends within LEASE_TOLERANCE (PostgreSQL keeps a timestamp to the microsecond)."""
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(a, b, rel_tol=0.0, abs_tol=LEASE_TOLERANCE)
    return bool(a == b)


def snapshot_departure(s: TaskState, observed: dict[str, Any]) -> str:
    """Words for a snapshot that does not show what the answers imply (empty when it does). A task
    made terminal by the finish of another generation than its current one has no snapshot that
    follows from the answers (the checker's rule: a terminal state is explained by a finish of that
    generation and outcome)."""
    shown = (observed.get("state"), observed.get("generation"), observed.get("lease_until"))
    implied = (s.state, s.generation, s.lease_until)
    if shown[:2] != implied[:2] or not _same_lease_end(shown[2], implied[2]):
        same = (shown[0] == implied[0], shown[1] == implied[1], _same_lease_end(shown[2], implied[2]))
        a, b = _t(shown[2]), _t(implied[2])
        if a == b and not same[2]:  # equal at six digits, not equal: every digit, so the difference is seen
            a, b = repr(shown[2]), repr(implied[2])
        differs = [name for name, ok in zip(("state", "generation", "lease_until"), same, strict=True) if not ok]
        return (f"snapshot shows {shown[0]} / generation {shown[1]} / lease_until {a}, but the answers "
                f"imply {implied[0]} / generation {implied[1]} / lease_until {b} ({', '.join(differs)} differs)")
    if s.state in TERMINAL_STATES and s.finishes and (s.generation, s.state) not in s.finishes:
        gen, outcome = s.finishes[-1]
        return (f"snapshot shows {s.state} at generation {s.generation}, but no accepted finish explains it "
                f"(the last was generation {gen}'s {outcome})")
    return ""


# -- several tasks: what ``takeover explore`` judges (one TaskState per task) ---------------------------------
def claimable_tasks(states: Mapping[str, TaskState], now: float) -> list[str]:
    """The tasks a claim at ``now`` may hand out, in name order: the spec says a claim takes *one*
    claimable task, not which one, so any of these is a correct answer."""
    return sorted(task for task, s in states.items() if s.state is not None and s.claimable(now))


def claim_departures(states: Mapping[str, TaskState], step: dict[str, Any], got: tuple[str, int, float] | None,
                     lease: float) -> tuple[list[str], str]:
    """The invariants broken by a claim's answer on a queue holding several tasks (``got`` is the
    contract's ``(task, generation, lease_until)`` or None): a claim must hand out one of the
    claimable tasks, with that task's next generation and ``now + lease``, and may come back empty
    only when none is claimable."""
    now = float(step["t"])
    if got is None:
        open_ = claimable_tasks(states, now)
        if not open_:
            return [], ""
        task = open_[0]
        more = f" (and {len(open_) - 1} more)" if len(open_) > 1 else ""
        return [NO_LOST_TASK], (f"claim at t={now:g} returned None, but task {task} was "
                                f"{_describe(states[task], now)}{more}")
    task, generation, lease_until = got
    names, words = step_departures(states.get(task, TaskState()), step, (generation, lease_until), lease)
    return names, (f"task {task}: {words}" if words else "")


def snapshot_departures(states: Mapping[str, TaskState], rows: list[tuple[Any, ...]]) -> str:
    """Words for a snapshot of several tasks that does not show what the answers imply: a task the
    answers put in some state missing or listed twice, a task never registered listed, or a task's
    row different from its model (:func:`snapshot_departure`); empty when it shows them all."""
    seen: dict[str, int] = {}
    words: list[str] = []
    for row in rows:
        task = str(row[0])
        seen[task] = seen.get(task, 0) + 1
        s = states.get(task, TaskState())
        if s.state is None:
            words.append(f"snapshot lists task {task}, which was never registered")
            continue
        if seen[task] == 1:
            said = snapshot_departure(s, {"state": row[1], "generation": row[2], "lease_until": row[3]})
            if said:
                words.append(f"task {task}: {said}")
    for task, s in sorted(states.items()):
        if s.state is not None and seen.get(task, 0) != 1:
            words.append(f"snapshot lists task {task} {seen.get(task, 0)} times, expected once "
                         f"({s.state} at generation {s.generation})")
    return "; ".join(words)
