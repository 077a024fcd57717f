"""Model coverage: the space of situations the spec distinguishes, and which one a queue call is in.

Why: a run that never put the queue in a situation proves nothing about it. Faults and counts say what
the harness *did*; this space says what the queue was *asked*, in the spec's own terms (docs/spec.md),
so a run can say which situations it reached and which it never did, and an explorer or a nemesis can
steer toward the ones not yet seen. Pure Python, no pandas: the explorer calls :func:`classify` once
per step, the checker mirrors it vectorized (takeover._internal.checker.model_coverage, tested to agree).

A **cell** is four coordinates, written as one stable key ``"op/state/caller/time"``
(e.g. ``"finish_done/running/stale/edge"``):

* ``op``: the call. ``register``, ``claim``, ``finish_done``, ``finish_uncertain``, ``extend``,
  ``snapshot``, and the extra ``resolve`` (reconciliation of an uncertain task, any resolution).
* ``state``: the task's state just before the call, in the spec's model: ``absent`` (never
  registered), ``pending``, ``running``, ``done``, ``uncertain``. Which task: the one the call names
  (register, finish, extend, resolve); for a claim, the task it returned, or when it returned none the
  task the caller watches (the explorer: its model's task; a history: the caller's last claimed task);
  for a snapshot, each task it lists.
* ``caller``: who calls, relative to that task.

  - ``holder``: holds the task's current generation and its lease has not run out (``now <
    lease_until``); for a done or uncertain task, the generation that ended it.
  - ``stale``: holds an older generation: someone claimed the task since (a takeover), or a
    reconciliation sent it back to pending.
  - ``expired``: holds the current generation of a running task whose lease ran out
    (``now >= lease_until``) with no takeover since.
  - ``never``: never held the task: a claim by a worker that never had it, a finish or extend with a
    generation no claim of the task returned, and every register and snapshot (they name no caller
    and no generation, so the queue cannot tell who calls).

* ``time``: ``now`` relative to the task's current lease (its ``lease_until``), for a running task:

  - ``inside``: well inside, ``now < lease_until - tick``;
  - ``edge``: within one tick of ``lease_until``, either side (``lease_until - tick <= now <
    lease_until + tick``); a holder is on the inner side of it, an expired caller on the outer;
  - ``past``: ``now >= lease_until + tick``;
  - ``none``: the task has no lease (absent, pending, done, uncertain).

  The **tick** is the resolution at which "just before / just after the end" is judged: in the
  spec's scenarios and any run on the logical clock, one logical second (:data:`SCENARIO_TICK`, the
  scenarios' step); in stress, :func:`stress_tick` of the run's lease (50 ms, less for leases under
  half a second), the spacing of a worker's calls that a late finish or heartbeat must beat.

Some cells cannot exist (a ``holder`` of a pending task, a ``time`` on a task without a lease, a
register that names a caller): :func:`impossible` lists each with its reason in words; the rest are
:func:`possible`. What the spec answers in each cell is :func:`spec_answer`; the cells where it
answers *no* (a refusal, or "changes nothing") or sit on the lease's edge are the ones bugs hide in
(:func:`important`).

The API, all pure: :data:`OPS`, :data:`STATES`, :data:`CALLERS`, :data:`TIMES`, :func:`key`,
:func:`parse`, :func:`cells`, :func:`possible`, :func:`impossible`, :func:`important`,
:func:`spec_answer`, :func:`caller_of`, :func:`time_of`, :func:`classify`, :func:`expand` (a pattern of cells,
for a bug to declare the cells it needs) and :func:`unreached_needs` (the check of those needs).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

OPS = ("register", "claim", "finish_done", "finish_uncertain", "extend", "snapshot", "resolve")
STATES = ("absent", "pending", "running", "done", "uncertain")
CALLERS = ("holder", "stale", "expired", "never")
TIMES = ("inside", "edge", "past", "none")

# Which optional contract method each operation needs (takeover.contract.EXTENSIONS): a queue without it
# cannot be asked, so its cells are impossible for that queue.
OP_EXTENSION = {"extend": "extend", "resolve": "resolve"}
ALL_EXTENSIONS = ("extend", "resolve")

SCENARIO_TICK = 1.0  # seconds of the logical clock: the spec's scenarios move in whole seconds
STRESS_TICK = 0.05  # seconds of the harness clock, for leases of half a second and more


def stress_tick(lease: float | None) -> float:
    """The tick of a stress run with this lease: 50 ms, or a tenth of a shorter-than-0.5 s lease (so
    ``edge`` stays a thin band around the end and ``inside`` is not empty)."""
    if lease is None or lease <= 0:
        return STRESS_TICK
    return min(STRESS_TICK, lease / 10)


class Cell(NamedTuple):
    op: str
    state: str
    caller: str
    time: str

    @property
    def key(self) -> str:
        return key(self.op, self.state, self.caller, self.time)


def key(op: str, state: str, caller: str, time: str) -> str:
    """The cell's stable key, ``"op/state/caller/time"``: what summary.json and every report use."""
    return f"{op}/{state}/{caller}/{time}"


def parse(cell_key: str) -> Cell:
    """``"op/state/caller/time"`` -> :class:`Cell`; ValueError naming the bad part otherwise."""
    parts = cell_key.split("/")
    if len(parts) != 4:
        raise ValueError(f"a coverage cell is op/state/caller/time, got {cell_key!r}")
    for value, allowed, what in zip(parts, (OPS, STATES, CALLERS, TIMES), ("op", "state", "caller", "time"),
                                    strict=True):
        if value not in allowed:
            raise ValueError(f"coverage cell {cell_key!r}: {what} {value!r} is not one of {', '.join(allowed)}")
    return Cell(*parts)


def cells() -> list[str]:
    """Every cell's key, possible or not, in a fixed order (op, state, caller, time)."""
    return [key(o, s, c, t) for o in OPS for s in STATES for c in CALLERS for t in TIMES]


def _a(word: str) -> str:
    return ("an " if word[0] in "aeiou" else "a ") + word


def _reason(op: str, state: str, caller: str, time: str, extensions: Iterable[str]) -> str | None:
    """Why a cell cannot exist, in words; None when it can. The first rule that applies wins."""
    needed = OP_EXTENSION.get(op)
    if needed is not None and needed not in extensions:
        return f"the queue has no {needed}() (an optional contract method), so it is never called"
    if state != "running" and time != "none":
        return f"{'a task that does not exist' if state == 'absent' else _a(state) + ' task'} has no lease, " \
               "so time is 'none'"
    if state == "running" and time == "none":
        return "a running task always has a lease (lease_until), so time is inside, edge or past"
    if op in ("register", "snapshot") and caller != "never":
        return f"{op} names no caller and no generation: the queue cannot tell who calls, so every {op} is 'never'"
    if state == "absent" and op in ("claim", "snapshot"):
        return ("a claim is classified by the task it returned or the caller last held, and neither can be a task "
                "that does not exist") if op == "claim" else "a snapshot lists registered tasks only"
    if state == "absent" and caller != "never":
        return "nobody can have held a task that was never registered"
    if state == "pending" and caller == "holder":
        return "a pending task has no holder: nobody holds a lease on it"
    if state == "pending" and caller == "stale" and "resolve" not in extensions:
        return "only a reconciliation (resolve to pending) sends a claimed task back to pending, and the queue has " \
               "no resolve()"
    if caller == "expired" and state != "running":
        return "expiry leaves a task running: only a running task's lease can run out with no takeover since" \
            if state == "pending" else f"{state} clears the lease, so nothing runs out; the generation that ended " \
            "it is the holder"
    if state == "running" and caller == "holder" and time == "past":
        return "a holder whose lease has run out is 'expired'"
    if state == "running" and caller == "expired" and time == "inside":
        return "an expired caller's lease has run out, so now is not inside it"
    return None


def impossible(extensions: Iterable[str] = ALL_EXTENSIONS) -> dict[str, str]:
    """Each impossible cell's key -> the reason, in words, for a queue with these optional methods."""
    ext = tuple(extensions)
    out = {}
    for o in OPS:
        for s in STATES:
            for c in CALLERS:
                for t in TIMES:
                    why = _reason(o, s, c, t, ext)
                    if why is not None:
                        out[key(o, s, c, t)] = why
    return out


def possible(extensions: Iterable[str] = ALL_EXTENSIONS) -> list[str]:
    """The cells a call can be in, for a queue with these optional methods, in :func:`cells` order."""
    ruled_out = impossible(extensions)
    return [k for k in cells() if k not in ruled_out]


def spec_answer(cell_key: str) -> str:
    """What the spec says a correct queue does in this cell, in a few words (docs/spec.md,
    takeover.contract). For a claim on a running task's edge: it takes the task only at or after
    ``lease_until``, so the side decides (a holder is before it, an expired caller at or after)."""
    op, state, caller, time = parse(cell_key)
    if op == "register":
        return "creates it pending, generation 0" if state == "absent" else "changes nothing"
    if op == "snapshot":
        return "lists it as it is"
    if op == "claim":
        if state == "pending":
            return "takes it: running, generation + 1"
        if state != "running":
            return "refuses: never claimable again"
        if time == "inside" or (time == "edge" and caller == "holder"):
            return "refuses: still leased"
        if time == "edge" and caller != "expired":
            return "takes it only at or after lease_until"
        return "takes it over: generation + 1"
    if op == "resolve":
        return "accepts" if state == "uncertain" and caller == "holder" else "refuses"
    if state == "running" and caller == "holder":
        return "accepts" if op != "extend" else "accepts: lease_until = now + lease"
    return "refuses"


def important(extensions: Iterable[str] = ALL_EXTENSIONS) -> list[str]:
    """The possible cells bugs hide in: where the spec answers no (a refusal, "changes nothing") or a
    lease is at its edge. A correct answer here is the code saying no at the right moment."""
    return [k for k in possible(extensions)
            if spec_answer(k).startswith(("refuses", "changes nothing", "takes it only")) or k.endswith("/edge")]


def time_of(state: str, now: float | None, lease_until: float | None, tick: float) -> str:
    """The time coordinate: where ``now`` falls relative to the task's ``lease_until`` (``none``
    for a state without a lease, or a lease not known)."""
    if state != "running" or now is None or lease_until is None:
        return "none"
    if now < lease_until - tick:
        return "inside"
    if now < lease_until + tick:
        return "edge"
    return "past"


def caller_of(state: str, caller_generation: int | None, current_generation: int | None,
              now: float | None = None, lease_until: float | None = None) -> str:
    """The caller coordinate from generations: ``caller_generation`` is the generation the caller
    holds of this task (the latest a claim gave it, or the one it passes to finish/extend/resolve;
    None or 0: it never held it), ``current_generation`` the task's. For a register or a snapshot
    pass None: they name no caller."""
    if not caller_generation or current_generation is None or caller_generation > current_generation:
        return "never"
    if caller_generation < current_generation or state == "pending":
        return "stale"
    if state == "running" and now is not None and lease_until is not None and now >= lease_until:
        return "expired"
    return "holder"


def classify(op: str, state: str, caller: str, now: float | None = None, lease_until: float | None = None,
             tick: float = SCENARIO_TICK) -> str:
    """The key of the cell one call is in, from what is known just before it: the operation, the
    task's state, the caller's relation to the task (:func:`caller_of`), the call's ``now``, the
    task's current ``lease_until`` (None without a lease) and the tick. A register or snapshot is
    always ``never``. The key may be an impossible cell when the inputs contradict each other (say,
    a ``holder`` past its lease): check it against :func:`impossible` if that matters."""
    if op not in OPS:
        raise ValueError(f"coverage: operation {op!r} is not one of {', '.join(OPS)}")
    if state not in STATES:
        raise ValueError(f"coverage: state {state!r} is not one of {', '.join(STATES)}")
    if caller not in CALLERS:
        raise ValueError(f"coverage: caller {caller!r} is not one of {', '.join(CALLERS)}")
    if op in ("register", "snapshot"):
        caller = "never"
    return key(op, state, caller, time_of(state, now, lease_until, tick))


def expand(pattern: str, extensions: Iterable[str] = ALL_EXTENSIONS) -> list[str]:
    """The possible cells a pattern names, in :func:`cells` order: four ``/``-separated parts, each a
    value, alternatives joined by ``|``, or ``*`` for any; e.g. ``"finish_done|finish_uncertain/running/
    stale/inside|edge"``. ValueError when a part names no coordinate, or the pattern no possible cell."""
    parts = pattern.split("/")
    if len(parts) != 4:
        raise ValueError(f"a coverage pattern is op/state/caller/time, got {pattern!r}")
    chosen = []
    for part, allowed, what in zip(parts, (OPS, STATES, CALLERS, TIMES), ("op", "state", "caller", "time"),
                                   strict=True):
        values = allowed if part == "*" else tuple(part.split("|"))
        bad = [v for v in values if v not in allowed]
        if bad:
            raise ValueError(f"coverage pattern {pattern!r}: {what} {bad[0]!r} is not one of {', '.join(allowed)}")
        chosen.append(set(values))
    out = [k for k in possible(extensions) if all(v in c for v, c in zip(k.split("/"), chosen, strict=True))]
    if not out:
        raise ValueError(f"coverage pattern {pattern!r} names no possible cell")
    return out


def unreached_needs(needs: Mapping[str, Iterable[str]], reached: Iterable[str]) -> dict[str, list[str]]:
    """For each named bug (a planted one, a mutant) the cells it needs that were not reached; a bug
    is left out when at least one of its cells was. ``needs``: bug name -> cell keys (any one of
    them suffices to see the bug). The selftest fails on a non-empty answer."""
    seen = set(reached)
    out: dict[str, list[str]] = {}
    for name, wanted in needs.items():
        cells_needed = list(wanted)
        if cells_needed and not seen.intersection(cells_needed):
            out[name] = cells_needed
    return out
