"""The claim_stampede fault (claim atomicity): claims that start within microseconds of each other.

The window: hold every idle worker at the claim gate, register a fresh task (or, every other window,
freeze a holder until its lease runs out), let them all go with one wake-up, paired so that two
claims start within microseconds: they race, and a claim that is not atomic hands one task out twice.
"""

from __future__ import annotations

import time
from typing import Any

from takeover._internal.run.aimed import AimedFaults, AimedKind, Frozen, Missed, Script
from takeover._internal.run.phases import task_id

KIND = "claim_stampede"
# Two claims that start closer than this overlap (a claim lasts a few tenths of a millisecond, and racers
# that meet leave within microseconds): the racers a script counts as having entered claim together.
TOGETHER = 0.00005
EXPIRY_RACE = 0.001  # script's racers on an expiring task go this long after its lease's end


def script(faults: AimedFaults, deadline: float, fields: dict[str, Any]) -> Script:
    """Workers held at the claim gate and let go at the same instant, every other window on a task
    just registered (``race_on`` "fresh"), the others on a task whose lease runs out as they go
    (``race_on`` "expiring"): two claimers that both pick the same expired row can both take it over
    when the pick does not lock it (a dropped FOR UPDATE SKIP LOCKED), a race no other fault lines up."""
    faults._stampedes += 1
    if faults._stampedes % 2 == 0:
        fields["race_on"] = "expiring"
        yield from _stampede_at_expiry(faults, deadline, fields)
        return
    kind = KIND
    fields["race_on"] = "fresh"
    hold = yield from faults._take_gate(kind, deadline)
    try:
        yield from faults._claims_settled(set())
        held = yield from faults._gather(faults._idle_workers())
        fields["task"] = faults.producer.register_new()  # recorded even when the stampede misses
        yield from _race(faults, hold, held, fields)
    finally:
        faults._open_gate(kind)


def _stampede_at_expiry(faults: AimedFaults, deadline: float, fields: dict[str, Any]) -> Script:
    """Freeze a holder (its task stays running), keep claims flowing until CLOSE_AHEAD before its lease
    ends (as expire_and_return does), gather the free workers at the gate, and let them go together at
    the lease's end: each claim then finds that one task claimable, and only one may get it."""
    kind = KIND
    holder: Frozen | None = None
    try:
        holder = yield from faults._freeze_holder(kind, deadline, fields, gated=True, past_lease=EXPIRY_RACE,
                                                spare=2)
        view = holder.view
        fields.update(task=task_id(view.task), gen=view.gen, lease_until=view.lease_until)
        yield from faults._reopen_until_expiry(kind, view.lease_until)
        hold = faults.holds
        yield from faults._claims_settled({holder.slot})
        held = yield from faults._gather(faults._idle_workers())
        at = view.lease_until + EXPIRY_RACE
        while time.time() < at:
            yield at - time.time()
        yield from _race(faults, hold, held, fields)
    finally:
        faults._thaw(holder)
        faults._open_gate(kind)


def _race(faults: AimedFaults, hold: int, held: list[int], fields: dict[str, Any]) -> Script:
    """Let the held workers go together and say how close their claims started (Missed: apart)."""
    released = faults._let_go_together(hold, held)
    yield from faults._left_the_gate(released)
    if len(released) < 2:
        raise Missed(f"only {len(released)} held worker(s) could be let go together")
    fields["workers"] = len(released)
    left = faults.board.left_line(hold, released)
    # when each racer left the line-up, in microseconds from the wake-up ("w0:12 w1:14"): how it went
    fields["left_us"] = " ".join(f"w{s}:{(t - faults._released_at) * 1e6:.0f}" for s, t in sorted(left.items()))
    raced, span = together(list(left.values()), TOGETHER)
    if raced < 2:
        raise Missed(f"the {len(released)} workers let go started their claims apart "
                     f"(none within {TOGETHER * 1e6:.0f} us of another)")  # fmt: skip
    fields.update(raced=raced, together_us=round(span * 1e6))
    fields["detail"] = (f"{len(released)} workers let go at the same instant, {raced} started their "
                        f"claims within {span * 1e6:.0f} us")  # fmt: skip


def together(times: list[float], within: float) -> tuple[int, float]:
    """The most of ``times`` that lie within ``within`` of each other, and their span."""
    times = sorted(times)
    best, span = min(1, len(times)), 0.0
    for i, first in enumerate(times):
        group = [t for t in times[i:] if t - first <= within]
        if len(group) > best:
            best, span = len(group), group[-1] - first
    return best, span


CLAIM_STAMPEDE = AimedKind(script)
