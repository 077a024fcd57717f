"""The duplicate_register fault (producer retries): a known task registered again, by many at once.

The window: register a pending, running, done or uncertain task again (the state dealt from a seeded
deck, :func:`pick_registered`), from the coordinator and from every held worker at the same instant.
A correct queue ignores it; one that resets a known task (an upsert) starts it over.
"""

from __future__ import annotations

import random
import time
from collections.abc import Generator
from typing import Any

from takeover._internal.run.aimed import AimedFaults, AimedKind, Missed, Script
from takeover._internal.run.phases import HOLDING, task_id

KIND = "duplicate_register"
STATE_CLASSES = ("pending", "running", "done", "uncertain")  # what script registers again
# The states in which registering a task again changes something in a queue that resets a known task
# (an upsert, or one that resets only some states, as uncertain ones): a fallback takes them before
# pending (see AimedFaults.pick_registered).
RESETTABLE = ("running", "done", "uncertain")
PICK_WAIT, PICK_POLL = 1.5, 0.05  # how long, and how often, script looks for its deck's state


def script(faults: AimedFaults, deadline: float, fields: dict[str, Any]) -> Script:
    kind = KIND
    chosen = yield from pick_registered(faults, deadline)
    if chosen is None:
        raise Missed("no registered task to register again")
    state, tid = chosen
    fields.update(task=tid, state=state)
    hold = yield from faults._take_gate(kind, deadline)
    workers: list[int] = []
    try:
        yield from faults._claims_settled(set())
        try:
            held = yield from faults._gather(faults._idle_workers())
        except Missed:
            held = []  # the coordinator still registers it again
        faults.board.ask_register(hold, int(tid[1:]))
        workers = faults._let_go_together(hold, held) if held else []
        done = faults.producer.register_again([tid])  # while the released workers register it too
        yield from faults._left_the_gate(workers)
    finally:
        faults._open_gate(kind)
    fields["workers"] = len(workers)
    if not done:
        raise Missed(f"the coordinator's register of the {state} task failed")
    if len(workers) < 2:
        raise Missed(f"only {len(workers)} worker(s) reached the claim gate to register the {state} task "
                     f"again at once (the coordinator did)")  # fmt: skip
    fields["detail"] = f"a {state} task registered again by the coordinator and {len(workers)} workers at once"


def pick_registered(faults: AimedFaults, deadline: float) -> Generator[float, None, tuple[str, str] | None]:
    """A task in the next state of the deck (running, done, uncertain, pending), or in another.

    The state is the seed's choice: each round of the deck takes every state once, the three a
    queue that resets a known task can get wrong (running, done, uncertain: an upsert that resets
    them all, or one that "retries" uncertain tasks only) first, in a seeded order, then pending,
    which shows nothing of the kind. A short run sees a few of these faults, so the round's order
    matters. The deck's state is waited for up to PICK_WAIT: a run's first window opens as the
    workers come up, before any task is running, done or uncertain. If it is still not there,
    another state is taken now (the resettable ones before pending) and the dealt one is put back
    on top of the deck, for the next window: uncertain tasks are rare in a run's first second
    (one action in twenty loses its reply), and a dealt state given up for good left a run
    without its only window on an uncertain task.
    """
    rng = faults.rngs["duplicate_register"]
    if not faults._deck:
        first = list(RESETTABLE)
        rng.shuffle(first)
        faults._deck = ["pending", *reversed(first)]  # popped from the end
    wanted = faults._deck.pop()
    until = min(deadline, time.time() + PICK_WAIT)
    if wanted == "uncertain" and (found := _registered_in(faults, wanted, rng)) is None:
        until = _make_uncertain(faults, until, deadline)
    while (found := _registered_in(faults, wanted, rng)) is None and time.time() < until:
        yield PICK_POLL
    if found is not None:
        return wanted, found
    for state in (*RESETTABLE, "pending"):
        if state != wanted and (found := _registered_in(faults, state, rng)) is not None:
            if state in faults._deck:
                faults._deck.remove(state)  # taken now: its turn in the round is used
            faults._deck.append(wanted)  # tried again next window
            return state, found
    faults._deck.append(wanted)
    return None


def _make_uncertain(faults: AimedFaults, until: float, deadline: float) -> float:
    """No task is uncertain: ask a worker that is working on a task (before its action) to lose its
    action's reply, so that its task ends uncertain (the lost-reply fault, recorded as the worker
    records a drawn one). Uncertain tasks come only from lost replies, a few a run, and none in its
    first seconds: waiting for one left a short run with no window on an uncertain task at all (issue
    23). The pick then waits for the worker's timeout and finish too, within the window: the new
    time it waits until."""
    working = [s for s in faults.hands.candidates(("working",)) if s not in faults.reserved]
    # Nobody working now (a loaded machine: the workers held, frozen or starting): any free worker is
    # asked, for its next action; if that comes after this window, the next one finds the task.
    working = working or [s for s in faults.hands.candidates() if s not in faults.reserved]
    if not working:
        return until
    faults.board.ask_lost_reply(faults.rngs["duplicate_register"].choice(working))
    return min(deadline, max(until, time.time() + PICK_WAIT + 2 * faults.cfg.client_timeout))


def _registered_in(faults: AimedFaults, state: str, rng: random.Random) -> str | None:
    """A registered task in ``state`` (running: held by a live worker; else from the queue's
    snapshot), or None. The snapshot is a queue call the nemesis' loop waits for: for a done or
    uncertain task it is asked only once a worker has had a finish accepted (the board counts them)."""
    if state == "running":
        running = sorted({faults.board.read(s).task for s in faults.hands.candidates(HOLDING)} - {-1})
        return task_id(rng.choice(running)) if running else None
    if state != "pending" and not any(faults.board.read(s).done for s in range(faults.board.slots)):
        return None
    ids = sorted(t for t, st in faults.producer.states() or [] if st == state)
    return rng.choice(ids) if ids else None


DUPLICATE_REGISTER = AimedKind(script)
