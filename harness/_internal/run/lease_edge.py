"""The lease_edge fault: a finish timed within a tick of its lease's end, on either side, or a little past it.

Why: the spec draws the line at ``lease_until`` exactly: a finish with ``now < lease_until`` is the
holder's and must be accepted; one at or after it must be refused until somebody takes the task
over, and after that too. A queue that is off at the line (a ``<=`` for a ``<``, a finish that
"tolerates clock skew" for a quarter of a second) is only exposed by a finish that lands there, and
expire_and_return resumes its holder 2-20 ms past the end only. So each lease_edge window is dealt a
side from a seeded deck, once each per round:

- ``before``: resumed 20-80 % of a tick before the lease ends: its finish is called inside the lease
  (a queue must accept it; a loaded machine may make it late, and then it is judged as late);
- ``just_after``: 5-80 % of a tick past the end;
- ``further_past``: from a tick to :data:`FURTHER` past the end.

Every side holds the claims back from CLOSE_AHEAD before the end until the finish returned (as
expire_and_return does, :func:`takeover._internal.run.expire_and_return.return_at`), so no takeover comes first: a late
finish is refused by a correct queue for its lease alone. The tick is the model coverage's
(:func:`takeover._internal.coverage_space.stress_tick`: a tenth of the lease, at most 50 ms), so each side
lands in the cell it aims at: ``edge`` (before and just after), ``past`` (further past).
"""

from __future__ import annotations

from typing import Any

from takeover._internal.coverage_space import stress_tick
from takeover._internal.run.aimed import AimedFaults, AimedKind, Script
from takeover._internal.run.expire_and_return import return_at

KIND = "lease_edge"
SIDES = ("before", "just_after", "further_past")
FURTHER = 0.3  # the furthest past the lease's end a further_past finish is called, in seconds


def margin(side: str, lease: float, draw: float) -> float:
    """How far past the lease's end (negative: before) a ``side`` window resumes its holder, for a
    ``draw`` uniform in [0, 1)."""
    t = stress_tick(lease)
    if side == "before":
        return -t * (0.2 + 0.6 * draw)
    if side == "just_after":
        return t * (0.05 + 0.75 * draw)
    return t + (max(FURTHER, 2 * t) - t) * draw


def script(faults: AimedFaults, deadline: float, fields: dict[str, Any]) -> Script:
    side = faults.deal(KIND, SIDES)
    fields["side"] = side
    yield from return_at(faults, KIND, deadline, fields, margin(side, faults.cfg.lease, faults.rngs[KIND].random()))
    late_ms = fields["late"] * 1000
    where = f"{-late_ms:.0f} ms before the lease's end" if late_ms < 0 else f"{late_ms:.0f} ms after the lease's end"
    fields["detail"] = f"finish called {where} ({side.replace('_', ' ')}), no claim in between"


LEASE_EDGE = AimedKind(script, ends_with_lease=True)
