"""The stale_return fault (S3): a holder whose task was taken over while it was frozen finishes it.

The window: freeze a holder between its action and its finish, wait until another worker has taken
the task over (:func:`freeze_stale`, :func:`await_takeover`, which stale_heartbeat shares), freeze the
new holder, resume the old one: the stale generation's finish lands while the new holder's lease is
valid. Or, in the other order dealt from the seed's deck (takeover._internal.run.aimed.STALE_ORDERS), the new
holder finishes first and the stale finish lands on a task that is done already.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from typing import Any

from takeover._internal.run.aimed import POLL, AimedFaults, AimedKind, Frozen, Missed, Script
from takeover._internal.run.phases import SlotView, task_id

KIND = "stale_return"


def script(faults: AimedFaults, deadline: float, fields: dict[str, Any]) -> Script:
    kind = KIND
    order = fields["order"]  # its lane, dealt when it arrived (see arrive)
    old: Frozen | None = None
    try:
        old = yield from freeze_stale(faults, kind, deadline, fields)
        view = old.view
        taker, new_view = yield from await_takeover(faults, old, order, fields)
        if order == "new_first":
            yield from _new_holder_first(faults, old, taker, new_view)
            fields["detail"] = (f"generation {view.gen}'s finish called after generation {new_view.gen}'s "
                                f"finish had returned")  # fmt: skip
            return
        yield from finish_while_held(faults, kind, old, taker, new_view)
        fields["detail"] = (f"generation {view.gen}'s finish called while generation {new_view.gen} "
                            f"held the task")  # fmt: skip
    finally:
        faults._thaw(old)


def finish_while_held(faults: AimedFaults, kind: str, old: Frozen, taker: int,
                      new_view: SlotView) -> Generator[float, None, None]:  # fmt: skip
    """stale_return's first order: the new holder (frozen by its probe) frozen for good, the stale one
    resumed, and its finish seen through while the new holder's lease is valid; the new holder resumed
    after (whatever happened)."""
    new = faults._freeze(taker, new_view, kind, new_view.lease_until - time.time())
    try:
        end = min(new_view.lease_until - 0.002, time.time() + max(1.0, 3 * faults.cfg.local_step))
        yield from faults._resume_to_finish(old, end, "the stale holder did not call finish while the new "
                                          "holder's lease was valid")  # fmt: skip
    finally:
        faults._thaw(new)


def _new_holder_first(faults: AimedFaults, old: Frozen, taker: int, new_view: SlotView) -> Generator[float, None, None]:
    """stale_return's other order: the new holder (frozen by its probe) goes on at once and its
    finish is seen through before the stale holder is resumed, so the stale finish lands on a task
    the new generation has finished."""
    calls = faults.board.finish_calls(taker)
    faults.reserved.add(taker)  # before it runs again: no kill or pause may take it from here on
    faults.hands.release(taker)
    yield from faults._see_finish(taker, new_view.process, calls, new_view.lease_until,
                                "the new holder did not call finish while its lease was valid")
    end = time.time() + max(1.0, 3 * faults.cfg.local_step)
    yield from faults._resume_to_finish(old, end, "the stale holder did not call finish within a second")


def freeze_stale(faults: AimedFaults, kind: str, deadline: float, fields: dict[str, Any],
                 phases: tuple[str, ...] | None = None) -> Generator[float, None, Frozen]:  # fmt: skip
    """Freeze a holder that is to become stale (its task taken over while it is frozen), leaving one
    free worker for each takeover awaited, this one's included: with the other windows' holders frozen
    too, the last free worker must not be frozen as well."""
    old = yield from faults._freeze_holder(kind, deadline, fields, spare=len(faults._takeovers) + 1, phases=phases)
    view = old.view
    fields.update(task=task_id(view.task), gen=view.gen, lease_until=view.lease_until)
    return old


def await_takeover(faults: AimedFaults, old: Frozen, lane: str,
                   fields: dict[str, Any]) -> Generator[float, None, tuple[int, SlotView]]:  # fmt: skip
    """Wait for another worker to take the frozen holder's task over (within a second, or two leases,
    of its expiry), and freeze the new holder by probing it: its slot and view, frozen (the caller
    releases or freezes it for good). ``lane`` keys the wait in ``faults._takeovers`` (see :meth:`AimedFaults.guards`).
    Missed if nobody took it over, or the new holder was inside a queue call then."""
    view = old.view
    give_up = view.lease_until + max(1.0, 2 * faults.cfg.lease)
    faults._takeovers[lane] = (view.lease_until, view.task)
    try:
        while True:  # wait for a takeover of the frozen holder's task
            taker = faults._holder_of(view.task, view.gen, exclude=old.slot)
            if taker is not None:
                break
            if time.time() > give_up:
                waited = give_up - view.lease_until
                raise Missed(f"no other worker took the task over within {waited:.1f} s of its expiry")
            yield POLL
        new_view = faults.hands.probe(taker)
    finally:
        faults._takeovers.pop(lane, None)
    if new_view is None or new_view.task != view.task or new_view.phase not in ("working", "acting", "acted"):
        if new_view is not None:
            faults.hands.release(taker)
        raise Missed("the new holder was inside a queue call (or gone) when it was to be frozen")
    fields.update(new_gen=new_view.gen, new_lease_until=new_view.lease_until)
    return taker, new_view


STALE_RETURN = AimedKind(script)
