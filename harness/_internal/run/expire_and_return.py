"""The expire_and_return fault (S2, the lease boundary): a holder's finish after its lease ran out,
before anyone took the task over.

The window: freeze a holder between its action and its finish, keep every other worker's claims back
from just before its lease ends (:func:`return_at`), then resume it alone: its finish comes after the
expiry and before any takeover. ``lease_edge`` (takeover._internal.run.lease_edge) builds its window the same way.
"""

from __future__ import annotations

import time
from typing import Any

from takeover._internal.run.aimed import AimedFaults, AimedKind, Frozen, Script
from takeover._internal.run.phases import task_id

KIND = "expire_and_return"
MARGIN = (0.002, 0.02)  # how far past a lease's end the frozen holder is resumed


def script(faults: AimedFaults, deadline: float, fields: dict[str, Any]) -> Script:
    kind = KIND
    margin = faults.rngs[kind].uniform(*MARGIN)
    yield from return_at(faults, kind, deadline, fields, margin)
    late_ms = fields["late"] * 1000
    fields["detail"] = f"finish called {late_ms:.0f} ms after the lease ran out, no claim in between"


def return_at(faults: AimedFaults, kind: str, deadline: float, fields: dict[str, Any], margin: float) -> Script:
    """Freeze a holder between its action and its finish, keep every claim back from CLOSE_AHEAD
    before its lease ends, and resume it ``margin`` seconds after that end (before it, when
    negative), alone: its finish is called then, and no claim can have taken the task over.
    ``fields["late"]``: how far past the lease's end it was resumed (negative: before)."""
    # The gate closes only once the holder is frozen: closed earlier, it would stop the claims
    # that make holders, and the hunt could wait for one in vain.
    holder: Frozen | None = None
    try:
        holder = yield from faults._freeze_holder(kind, deadline, fields, gated=True, past_lease=margin)
        view = holder.view
        fields.update(task=task_id(view.task), gen=view.gen, lease_until=view.lease_until)
        yield from faults._reopen_until_expiry(kind, view.lease_until)
        yield from faults._claims_settled({holder.slot})
        resume_at = view.lease_until + margin
        while time.time() < resume_at:
            yield resume_at - time.time()
        fields["late"] = round(time.time() - view.lease_until, 4)
        end = time.time() + max(1.0, 3 * faults.cfg.local_step)
        yield from faults._resume_to_finish(holder, end, "the resumed holder did not call finish within a second")
    finally:
        faults._thaw(holder)
        faults._open_gate(kind)


EXPIRE_AND_RETURN = AimedKind(script, ends_with_lease=True)
