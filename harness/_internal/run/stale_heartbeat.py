"""The stale_heartbeat fault: a holder that lost its task while it was frozen heartbeats before it finishes.

Why: a heartbeat (``extend``) must renew only the current generation's lease, and only while it is
valid. One that ignores the generation renews whatever runs under the task id, so a stale holder is
told it still holds the task while a newer generation does: two holders at once. Nothing else in a
run makes a stale holder heartbeat (a pause ends before its worker's next heartbeat is due, or the
heartbeat that follows a takeover is too late for the new holder's lease), so such a queue passed
hundreds of extends without one from a stale holder (issue 23).

The window, built as stale_return builds its own (:func:`takeover._internal.run.stale_return.freeze_stale`,
:func:`~takeover._internal.run.stale_return.await_takeover`): freeze a holder before its action or before its finish,
wait until another worker has taken its task over, freeze the new holder (its lease stays valid), ask the
stale one for a heartbeat on the phase board (:meth:`PhaseBoard.ask_heartbeat`) and resume it: at its
next step it calls ``extend`` once, whatever ``--heartbeat`` is (0 included), then acts and finishes if
the heartbeat kept its lease and stops if not. The window is ``hit`` once the extend returned while the
new holder's lease was valid; the stale holder's finish, if it calls one, is seen through before the
new holder is resumed. Only for a queue with ``extend`` (:func:`takeover.contract.has_extension`): on
another queue the kind is not tried at all.
"""

from __future__ import annotations

import time
from typing import Any

from takeover._internal.run.aimed import POLL, AimedFaults, AimedKind, Frozen, Missed, Script
from takeover._internal.run.stale_return import await_takeover, freeze_stale

KIND = "stale_heartbeat"
# Where the holder is frozen: the worker takes the heartbeat asked of it before its action (after its
# work) and before its finish (after its local step), so any of these phases leads to one.
PHASES = ("working", "acting", "acted")
EDGE = 0.002  # the extend must have returned this long before the new holder's lease ends


def applies(faults: AimedFaults) -> bool:
    """Only a queue with ``extend`` can be asked for a heartbeat."""
    producer = faults._producer
    return producer is not None and bool(producer.capabilities().get("extend"))


def script(faults: AimedFaults, deadline: float, fields: dict[str, Any]) -> Script:
    old: Frozen | None = None
    new: Frozen | None = None
    board = faults.board
    try:
        old = yield from freeze_stale(faults, KIND, deadline, fields, phases=PHASES)
        view = old.view
        taker, new_view = yield from await_takeover(faults, old, KIND, fields)
        new = faults._freeze(taker, new_view, KIND, new_view.lease_until - time.time())
        end = new_view.lease_until - EDGE
        extends, finishes = board.extend_calls(old.slot), board.finish_calls(old.slot)
        board.ask_heartbeat(old.slot)
        faults._thaw(old)
        faults.reserved.add(old.slot)  # still: no kill or pause may cut into its extend
        try:
            while board.extend_calls(old.slot) == extends:
                if board.read(old.slot).process != view.process or time.time() > end:
                    raise Missed("the stale holder did not heartbeat while the new holder's lease was valid")
                yield POLL
            fields["detail"] = (f"generation {view.gen}'s heartbeat called while generation {new_view.gen} "
                                f"held the task")  # fmt: skip
            # What it does next is the queue's answer's to decide: a finish (the heartbeat kept its lease) is
            # seen through while the new holder is still frozen; a holder that stopped calls none.
            until = min(end, time.time() + max(1.0, 3 * faults.cfg.local_step))
            while board.finish_calls(old.slot) == finishes and board.phase(old.slot) in PHASES and time.time() < until:
                yield POLL
            if board.finish_calls(old.slot) != finishes:
                try:
                    yield from faults._see_finish(old.slot, view.process, finishes, until, "")
                except Missed:
                    pass
        finally:
            faults.reserved.discard(old.slot)
            board.withdraw_heartbeat(old.slot)
    finally:
        faults._thaw(old)
        faults._thaw(new)


STALE_HEARTBEAT = AimedKind(script, applies)
