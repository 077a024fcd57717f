"""The aim_unreached fault: each window aimed at a cell of model coverage this run has not reached yet.

Why: the other aimed kinds each build one window, whatever the run has already seen; a 20 s run then
reaches a quarter of the spec's situations (takeover._internal.coverage_space), and a queue wrong in a situation
no window builds passes (a stale holder's ``finish(uncertain)`` accepted: no fault combined a lost
reply with a stale return). This kind asks, at each of its arrivals, which cells the run's history has
reached so far (takeover._internal.run.reached, read by the coordinator as the history grows) and builds a window
for one that it has not, in one of four ways (:func:`takeover._internal.coverage_aims.way`):

- ``call``: the coordinator calls the queue itself, on a task in the cell's state (from the queue's
  snapshot): a finish, heartbeat or resolve with a generation no claim returned (0: a ``never``
  caller), the generation before the task's current one (``stale``), or, on a task that has ended,
  the generation that ended it (``holder``); registers a known task again. Every such call is one a
  correct queue refuses or ignores, except the resolve of an uncertain task by its generation, whose
  resolution is the truth the ledger holds (as ``takeover reconcile`` resolves). The coordinator never
  finishes or heartbeats a running task with its current generation: that is its holder's to do.
- ``hold``: a lease holder frozen before its finish, every claim held back near its lease's end (as
  lease_edge builds its window, takeover._internal.run.expire_and_return.return_at), and at the cell's time on
  the lease (just before the end, just after it, or a tick past it) the coordinator's calls on that
  task, then the holder resumed: to finish (after losing its action's reply first, when the cell is
  a ``finish_uncertain``) or to heartbeat once (when it is an ``extend``).
- ``beat``: a holder at work asked for one heartbeat (an ``extend`` inside its lease).
- ``lost_stale``: a holder loses its action's reply, is frozen until another worker took its task
  over, and is resumed to finish ``uncertain`` while the new holder holds it: the stale holder's
  ``finish(uncertain)`` (takeover._internal.run.stale_return's window, after a lost reply).

Determinism: the plan is seeded (the arrivals, the order in which the aimable cells are tried, the
tasks and holders picked, as every aimed kind's); which cell a window aims at depends also on what
the run reached before it, which depends on the interleaving of real processes. So each window's
end record names its ``cell`` (and ``detail`` what it did): a check or a replay of the history sees
the steering as it happened, and the reproduce line reruns the same plan.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterable
from typing import Any

from takeover._internal import coverage_space as cs
from takeover._internal.coverage_aims import aimable, way
from takeover._internal.run.aimed import CLOSE_AHEAD, AimedFaults, AimedKind, Frozen, Missed, Script
from takeover._internal.run.phases import HOLDING, SlotView, task_id
from takeover._internal.run.stale_return import await_takeover, finish_while_held

KIND = "aim_unreached"
ABSENT_BASE = 90_000_000  # task ids never registered (``absent``) start here: far past any run's arrivals
CALL_OPS = ("finish_done", "finish_uncertain", "extend", "resolve")
UNCERTAIN_WAIT = 0.1  # how often a window that needs an uncertain task looks for one
# How often a window looks at the board while it waits: a holder's ``acted`` phase lasts the local step (40 ms
# in the profiles), so 5 ms sees it, and the coordinator's loop, on a core the workers share, spins ten times
# less than at the frame's POLL.
LOOK = 0.005
TRIES = 2  # windows aimed at one cell at most


def targets(cells: Iterable[str], reached: Iterable[str]) -> list[str]:
    """The cells of ``cells`` (the plan's order) not in ``reached``, in that order."""
    seen = set(reached)
    return [c for c in cells if c not in seen]


# The order the ways are tried in: first the lost reply before a stale return (a real stale holder's
# finish(uncertain): the situation issue 36 found no fault made, one cell), then the coordinator's calls (one
# window reaches every cell of a task's state, and freezes nobody), the heartbeat, and the holds last (each
# freezes a holder for most of a lease).
WAY_ORDER = ("lost_stale", "call", "beat", "hold")


def plan(faults: AimedFaults) -> list[str]:
    """The run's order of aimable cells: by :data:`WAY_ORDER`, the important cells
    (takeover._internal.coverage_space.important) first within a way, each group shuffled by the kind's stream, so
    --seed alone decides which is tried first."""
    exts = tuple(k for k, v in faults.producer.capabilities().items() if v and k in cs.ALL_EXTENSIONS)
    important = set(cs.important(exts))
    rng = faults.rngs[KIND]
    out: list[str] = []
    for how in WAY_ORDER:
        for first in (True, False):
            group = [c for c in aimable(exts) if way(c) == how and (c in important) == first]
            rng.shuffle(group)
            out += group
    return out


def script(faults: AimedFaults, deadline: float, fields: dict[str, Any]) -> Script:
    order = faults.cell_plan
    if order is None:
        order = faults.cell_plan = plan(faults)
    tried = faults.cells_tried
    # A cell already tried goes behind the untried ones, and one tried TRIES times is not tried again: a cell
    # the run cannot reach (no holder at generation 2 came) must not take the windows the others need, nor
    # freeze workers for nothing once every cell was tried.
    todo = [c for c in targets(order, faults.producer.reached()) if tried.get(c, 0) < TRIES]
    todo.sort(key=lambda c: tried.get(c, 0))  # stable: the plan's order within each count
    if not todo:
        fields["detail"] = f"every cell a window can aim at was reached or tried {TRIES} times"
        return
    cell = _first_ready(faults, todo) or todo[0]
    tried[cell] = tried.get(cell, 0) + 1
    fields["cell"] = cell
    how = way(cell)
    if how != "call":
        yield from _ride_along(faults, deadline, fields, [c for c in todo if c != cell])
    if how == "call":
        yield from _call_window(faults, deadline, fields, cell, set(todo))
    elif how == "hold":
        yield from _hold_window(faults, deadline, fields, cell, set(todo))
    elif how == "beat":
        yield from _beat_window(faults, deadline, fields)
    else:
        yield from _lost_stale_window(faults, deadline, fields)


# -- call: the coordinator's own calls --------------------------------------------------------------------
def _calls_for(state: str, gen: int, running: bool, wanted: set[str]) -> list[tuple[str, int, str]]:
    """The (op, generation, cell) calls on a task in ``state`` at ``gen`` that fall in ``wanted`` cells:
    a generation no claim returned (0), the one before the current (stale, from generation 2 on), and,
    for a task that is not running (or a resolve, which a correct queue refuses on a running task), the
    current one (holder)."""
    out = []
    for op in CALL_OPS:
        callers = [("never", 0)]
        if gen >= 2:
            callers.append(("stale", gen - 1))
        if gen >= 1 and (not running or op == "resolve"):
            callers.append(("holder", gen))
        for caller, g in callers:
            out.append((op, g, caller))
    return [(op, g, caller) for op, g, caller in out if any(c.startswith(f"{op}/{state}/{caller}/") for c in wanted)]


def _call_window(faults: AimedFaults, deadline: float, fields: dict[str, Any], cell: str,
                 wanted: set[str]) -> Script:  # fmt: skip
    op, state, caller, _time = cs.parse(cell)
    producer = faults.producer
    if state == "absent":
        faults.absent_calls += 1
        tid = task_id(ABSENT_BASE + faults.absent_calls)
        for o in CALL_OPS:
            if f"{o}/absent/never/none" in wanted:
                producer.ask(o, tid, 0)
        fields.update(task=tid, detail=f"calls on task {tid}, never registered")
        return
    row = yield from _find_task(faults, deadline, state, caller)
    tid, gen, lease_until = row
    fields.update(task=tid, gen=gen)
    if op == "register":
        producer.register_again([tid])
        fields["detail"] = f"the {state} task registered again by the coordinator"
        return
    calls = _calls_for(state, gen, state == "running", wanted | {cell})
    if state == "running":  # only while the lease is valid: its edge and past are the hold's
        calls = [c for c in calls if time.time() < lease_until - 2 * cs.stress_tick(faults.cfg.lease)]
    made = []
    for o, g, _c in calls:
        producer.ask(o, tid, g)
        made.append(f"{o}({g})")
    fields["detail"] = f"the coordinator's calls on the {state} task at generation {gen}: {', '.join(made)}"


def _fitting(faults: AimedFaults, rows: list[tuple[str, str, int, float | None]], state: str,
             caller: str) -> list[tuple[str, int, float]]:  # fmt: skip
    """The tasks of ``rows`` a call window on ``state`` can take: generation 2 or more for a stale caller,
    1 or more for a holder, and for a running one a lease valid for a few ticks more."""
    now = time.time()
    tick = cs.stress_tick(faults.cfg.lease)
    return sorted(
        (str(t), int(g), float(lu) if lu is not None else 0.0)
        for t, s, g, lu in rows
        if s == state
        and (caller != "stale" or g >= 2)
        and (caller != "holder" or g >= 1)
        and (state != "running" or (lu is not None and lu > now + 4 * tick))
    )


def _ride_along(faults: AimedFaults, deadline: float, fields: dict[str, Any], todo: list[str]) -> Script:
    """A window that freezes workers (a hold, a lost reply) may take seconds, and one window of the kind runs
    at a time: the first call cell that is ready now is done first, in the same window (the coordinator's
    calls take milliseconds), so a short run still gets its calls. Its cell and what it did go in ``also``."""
    ride = _first_ready(faults, [c for c in todo if way(c) == "call"], ready_only=True)
    if ride is None:
        return
    faults.cells_tried[ride] = faults.cells_tried.get(ride, 0) + 1
    extra: dict[str, Any] = {}
    try:
        yield from _call_window(faults, deadline, extra, ride, set(todo))
    except Missed as exc:
        extra["detail"] = f"missed: {exc}"
    fields["also"] = f"{ride}: {extra.get('detail', '')}"


def _first_ready(faults: AimedFaults, todo: list[str], ready_only: bool = False) -> str | None:
    """The first cell of ``todo`` a window can build now: a call window's only when the snapshot holds a task
    in its state now, a stale caller's hold only when a holder of generation 2 or more is on the board (a
    window that waits for one, say an uncertain task at generation 2, is a window lost to the other cells);
    the first cell of all when none can (None with ``ready_only``)."""
    rows: list[tuple[str, str, int, float | None]] | None = None
    for cell in todo:
        _op, state, caller, _time = cs.parse(cell)
        if way(cell) == "hold" and caller == "stale":  # a holder of generation 2 or more, on the board now
            if any(faults.board.read(s).gen >= 2 for s in faults.hands.candidates(HOLDING)):
                return cell
            continue
        if way(cell) != "call" or state == "absent":
            return cell
        if rows is None:
            rows = faults.producer.rows() or []
        if _fitting(faults, rows, state, caller):
            return cell
    return None if ready_only or not todo else todo[0]


def _find_task(faults: AimedFaults, deadline: float, state: str,
               caller: str) -> Generator[float, None, tuple[str, int, float]]:  # fmt: skip
    """A task in ``state`` from the queue's snapshot (see :func:`_fitting`); for an uncertain one, a worker
    is asked to lose its next reply when none is, and the window waits for it."""
    rng = faults.rngs[KIND]
    asked = False
    start = time.time()
    while True:
        fit = _fitting(faults, faults.producer.rows() or [], state, caller)
        if fit:
            return rng.choice(fit)
        if state == "uncertain" and not asked:
            asked = _ask_lost_reply(faults)
        if time.time() > deadline:
            more = " at generation 2 or more" if caller == "stale" else ""
            raise Missed(f"no {state} task{more} in the queue's snapshot for {time.time() - start:.1f} s")
        yield UNCERTAIN_WAIT


def _ask_lost_reply(faults: AimedFaults) -> bool:
    working = [s for s in faults.hands.candidates(("working",)) if s not in faults.reserved]
    if not working:
        return False
    faults.board.ask_lost_reply(faults.rngs[KIND].choice(sorted(working)))
    return True


# -- hold: a holder frozen to the cell's time on its lease ---------------------------------------------------
def margin(cell: str, lease: float) -> float:
    """When, against the frozen holder's lease end, the hold's calls and the holder's resume come: half a
    tick before it for a holder at the edge, 0.3 tick after it for the rest of the edge, 1.5 ticks past it
    for ``past`` (takeover._internal.coverage_space.time_of)."""
    _op, _state, caller, when = cs.parse(cell)
    tick = cs.stress_tick(lease)
    if when == "past":
        return 1.5 * tick
    return -0.5 * tick if caller == "holder" else 0.3 * tick


def _hold_window(faults: AimedFaults, deadline: float, fields: dict[str, Any], cell: str,
                 wanted: set[str]) -> Script:  # fmt: skip
    op, _state, caller, _time = cs.parse(cell)
    m = margin(cell, faults.cfg.lease)
    lose = op == "finish_uncertain" and caller in ("holder", "expired")
    beat = op == "extend" and caller in ("holder", "expired")
    want: Callable[[SlotView], bool] = (lambda v: v.gen >= 2) if caller == "stale" else (lambda v: True)
    board = faults.board
    holder: Frozen | None = None
    try:
        if lose:
            holder = yield from lose_then_freeze(faults, deadline, want, m)
            while faults.gate_owner is not None:  # its gate, taken back near the lease's end below
                if time.time() > holder.view.lease_until - CLOSE_AHEAD:
                    owner = faults.gate_owner
                    raise Missed(f"claims were held by {owner} when the frozen holder's lease neared its end")
                yield LOOK
            faults._own_gate(KIND, close=True)
        else:
            holder = yield from freeze_where(faults, deadline, want, m, gated=True)
        view = holder.view
        tid = task_id(view.task)
        fields.update(task=tid, gen=view.gen, lease_until=view.lease_until)
        yield from faults._reopen_until_expiry(KIND, view.lease_until)
        yield from faults._claims_settled({holder.slot})
        at = view.lease_until + m
        while time.time() < at:
            yield at - time.time()
        made = []
        for o, g, _c in _calls_for("running", view.gen, True, wanted | {cell}):
            faults.producer.ask(o, tid, g)
            made.append(f"{o}({g})")
        if any(c.startswith("register/running/") for c in wanted):
            faults.producer.register_again([tid])
            made.append("register")
        late_ms = (time.time() - view.lease_until) * 1000
        what = "heartbeat" if beat else "finish"
        if beat:
            extends = board.extend_calls(holder.slot)
            board.ask_heartbeat(holder.slot)
            faults._thaw(holder)
            faults.reserved.add(holder.slot)
            try:
                end = time.time() + max(1.0, 3 * faults.cfg.local_step)
                while board.extend_calls(holder.slot) == extends:
                    if board.read(holder.slot).process != view.process or time.time() > end:
                        raise Missed("the resumed holder did not heartbeat within a second")
                    yield LOOK
            finally:
                faults.reserved.discard(holder.slot)
                board.withdraw_heartbeat(holder.slot)
        else:
            end = time.time() + max(1.0, 3 * faults.cfg.local_step)
            yield from faults._resume_to_finish(holder, end, "the resumed holder did not call finish within a second")
        calls = f"; the coordinator's calls: {', '.join(made)}" if made else ""
        lost = " after losing its reply" if lose else ""
        when = f"{late_ms:+.0f} ms from its lease's end"
        fields["detail"] = f"the holder's {what}{lost} {when}, no claim in between{calls}"
    finally:
        faults._thaw(holder)
        faults._open_gate(KIND)


def freeze_where(faults: AimedFaults, deadline: float, want: Callable[[SlotView], bool], past_lease: float,
                 gated: bool, phases: tuple[str, ...] | None = None) -> Generator[float, None, Frozen]:  # fmt: skip
    """takeover._internal.run.aimed.AimedFaults._freeze_holder for a holder ``want`` accepts (say, generation 2 or
    more), taking the claim gate with the freeze when ``gated``."""
    phases = phases or faults._holder_phases()
    pick = faults.rngs["targets"]
    while True:
        if not (gated and faults.gate_owner is not None) and faults._idle_workers() > 1:
            slots = [s for s in faults.hands.candidates(phases) if s not in faults.reserved]
            pick.shuffle(slots)
            for slot in slots:
                if not want(faults.board.read(slot)):
                    continue
                view = faults.hands.probe(slot)
                if view is None:
                    continue
                if view.phase in phases and view.lease_until > time.time() + 0.005 and want(view):
                    if gated:
                        faults._own_gate(KIND, close=True)
                    return faults._freeze(slot, view, KIND, view.lease_until + past_lease - time.time())
                faults.hands.release(slot)
        if time.time() > deadline:
            raise Missed(f"no lease holder fit for the window was in phase {'/'.join(phases)} while claims were free")
        yield LOOK


def lose_then_freeze(faults: AimedFaults, deadline: float, want: Callable[[SlotView], bool],
                     past_lease: float, spare: int = 1) -> Generator[float, None, Frozen]:  # fmt: skip
    """A holder at work asked to lose its action's reply (it then finishes ``uncertain``), and frozen once
    the lost reply's timeout is over, before its finish. The slot is kept from kills and pauses meanwhile."""
    cfg, board = faults.cfg, faults.board
    need = cfg.client_timeout + cfg.local_step + 0.15
    pick = faults.rngs["targets"]
    chosen: SlotView | None = None
    while chosen is None:
        if faults._idle_workers() > spare:
            slots = [s for s in faults.hands.candidates(("working",)) if s not in faults.reserved]
            pick.shuffle(slots)
            for slot in slots:
                v = board.read(slot)
                if v.phase == "working" and v.lease_until - time.time() > need and want(v):
                    chosen = v
                    break
        if chosen is None:
            if time.time() > deadline:
                raise Missed(f"no holder was at work with {need:.2f} s of its lease left, to lose its reply")
            yield LOOK
    slot = chosen.slot
    faults.reserved.add(slot)
    board.ask_lost_reply(slot)
    frozen: Frozen | None = None
    try:
        while frozen is None:
            v = board.read(slot)
            if v.process != chosen.process or v.task != chosen.task or v.gen != chosen.gen:
                raise Missed("the holder asked to lose its reply left its task before its finish")
            if time.time() > chosen.lease_until:
                raise Missed("the holder asked to lose its reply had not timed out when its lease ended")
            if v.phase == "acted":
                probe = faults.hands.probe(slot)
                if probe is not None and probe.phase == "acted" and probe.task == chosen.task:
                    frozen = faults._freeze(slot, probe, KIND, probe.lease_until + past_lease - time.time())
                    break
                if probe is not None:
                    faults.hands.release(slot)
            yield LOOK
    finally:
        if frozen is None:
            faults.reserved.discard(slot)
    return frozen


# -- beat and lost_stale ------------------------------------------------------------------------------------
def _beat_window(faults: AimedFaults, deadline: float, fields: dict[str, Any]) -> Script:
    board = faults.board
    while True:
        slots = sorted(
            s
            for s in faults.hands.candidates(("working",))
            if s not in faults.reserved and board.read(s).lease_until > time.time() + 0.3
        )
        if slots:
            break
        if time.time() > deadline:
            raise Missed("no holder was at work with 0.3 s of its lease left")
        yield LOOK
    slot = faults.rngs[KIND].choice(slots)
    view = board.read(slot)
    extends = board.extend_calls(slot)
    board.ask_heartbeat(slot)
    try:
        end = max(deadline, time.time() + 1.0)
        while board.extend_calls(slot) == extends:
            if board.read(slot).process != view.process or time.time() > end:
                raise Missed("the holder asked for a heartbeat did not call extend in time")
            yield LOOK
    finally:
        board.withdraw_heartbeat(slot)
    fields.update(task=task_id(view.task), gen=view.gen, detail="a holder's heartbeat inside its lease")


def _lost_stale_window(faults: AimedFaults, deadline: float, fields: dict[str, Any]) -> Script:
    old: Frozen | None = None
    try:
        old = yield from lose_then_freeze(faults, deadline, lambda v: True, 0.0, spare=len(faults._takeovers) + 1)
        view = old.view
        fields.update(task=task_id(view.task), gen=view.gen, lease_until=view.lease_until)
        taker, new_view = yield from await_takeover(faults, old, KIND, fields)
        yield from finish_while_held(faults, KIND, old, taker, new_view)
        fields["detail"] = (
            f"generation {view.gen}'s finish(uncertain), after a lost reply, called while generation "
            f"{new_view.gen} held the task"
        )
    finally:
        faults._thaw(old)


AIM_UNREACHED = AimedKind(script, ends_with_lease=True)
