"""Two calls at once, in one process: one parked inside itself before one of its own statements, while
another actor's call runs in the gap.

Why: one call after another, a queue whose claim reads in one statement and writes in another (no
transaction), or whose transaction takes SQLite's write lock only at its first write (a deferred
``BEGIN``), answers every sequence right. It breaks only when another call lands *between* its
statements: the claim that read a pending task writes it after someone else took it; the deferred
transaction's write fails at once with "database is locked" while another writer holds the lock, or
its read goes stale under it (SQLITE_BUSY_SNAPSHOT). A stress run reaches those moments by luck;
here they are made on purpose, and judged by the spec's model (``takeover explore``), or rerun from a
scenario file (``pause_before_statement`` ... ``resume``) as the same experiment.

How: the paused call runs on a second queue object opened on the same database, as a second worker
process would open it (:class:`Peer`), on its own deadlined caller thread; every connection that
opening made is installed on a :class:`~takeover._internal.failpoints.StatementHook`, and a trap armed at
statement ``k`` parks the call there, inside the hook's callback, on that thread. Then the gap call
runs on the main queue. When it has not returned after ``gap_wait`` seconds, it waits on a lock the
parked call holds (SQLite's write lock, a PostgreSQL row lock) or is slow: the parked call is released
anyway, and both are joined, each within the step timeout, so nothing hangs and no thread is left
holding the database. The snapshot is read once both are done.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from takeover._internal.failpoints import Point, StatementHook
from takeover._internal.run.queue_caller import QueueCaller
from takeover._internal.scenario.engine import OPEN, PAUSABLE, Replay, StepHung
from takeover._internal.scenario.results import StepResult, same
from takeover.contract import open_queue

DEFAULT_GAP_WAIT = 0.1  # seconds the gap call is given before the parked call is released anyway
UNSEEN_LOCK_WAIT = 0.5  # the same, when the paused call holds no lock the hook sees
LOCKED, UNLOCKED, ENDED = "locked", "unlocked", "ended"  # where the paused call stood (Overlap.stood)


@dataclass
class Overlap:
    """What one overlap did: the paused call and the gap call (their answers in ``observed``, the
    snapshot after both in the gap call's), where the pause fell, and in which order they returned."""

    paused: StepResult
    gap: StepResult
    pause: int  # the statement the paused call was to stop before (1-based)
    point: Point | None  # where it parked; None: its call ended before issuing that many statements
    statements: int  # statements the paused call issued in all
    gap_first: bool  # the gap call returned while the paused one was still parked
    released_early: bool  # the gap call had not returned when the parked call was released
    hung: StepHung | None = None

    @property
    def stood(self) -> str:
        """Where the paused call stood when the gap call ran: holding SQLite's write lock, holding none, or
        already returned (its call issued fewer statements)."""
        if self.point is None:
            return ENDED
        return LOCKED if self.point.locked else UNLOCKED

    @property
    def overlapped(self) -> bool:
        """Whether the two calls were under way at once (either may then have taken effect first)."""
        return self.point is not None


class Peer:
    """A second queue object on a replay's database: its own caller thread, its connections on a hook."""

    def __init__(self, replay: Replay) -> None:
        self.hook = StatementHook()
        self.replay = Replay(replay.queue_spec, replay.factory, replay.workdir, replay.db_path, replay.lease,
                              QueueCaller(), replay.step_timeout, replay.task, tuple(replay.tasks))

    def open(self) -> None:
        """Open it with every connection the opening makes installed on the hook (the main queue's are not:
        it is opened without the patch, and nothing else opens while this does)."""
        r, hook = self.replay, self.hook

        def opening() -> Any:
            with hook.watching():
                return open_queue(r.queue_spec, r.db_path, r.factory)

        r.queue = r._call(OPEN, opening)

    def on_thread(self, name: str, fn: Any) -> Any:
        """``fn()`` on the peer's caller thread (a sqlite3 connection may refuse other threads)."""
        return self.replay._call(name, fn)

    def close(self) -> None:
        try:
            self.replay.close()
        finally:
            self.replay.caller.stop()


def peer_of(replay: Replay) -> Peer:
    """The replay's second queue object, opened on first use."""
    if replay.peer is None:
        peer = Peer(replay)
        replay.peer = peer
        peer.open()
    assert isinstance(replay.peer, Peer)
    return replay.peer


def run_overlap(replay: Replay, paused: StepResult, pause: int, gap: StepResult,
                gap_wait: float = DEFAULT_GAP_WAIT) -> Overlap:
    """Start ``paused`` on the peer, parked before its statement ``pause``; run ``gap`` on the main queue;
    release and join; read the snapshot into ``gap``. A call that does not return in the step timeout
    is the overlap's ``hung`` (the scenario stops there, as after any hang)."""
    timeout = replay.step_timeout
    try:
        peer = peer_of(replay)
    except StepHung as hung:
        return _hung(paused, gap, pause, hung)
    op = paused.spec["step"]
    settled, release = threading.Event(), threading.Event()
    where: list[Point] = []

    def action(point: Point) -> bool:  # on the peer's caller thread, inside the statement callback
        where.append(point)
        settled.set()
        release.wait(timeout)
        return True

    def arm() -> None:
        peer.hook.arm(op, pause, action)
        peer.hook.call(op)  # the statements from now on are this call's (switched on, on this thread)

    try:
        peer.on_thread("arm", arm)
    except StepHung as hung:
        return _hung(paused, gap, pause, hung)
    outcome: list[StepHung | None] = []

    def drive() -> None:
        try:
            outcome.append(peer.replay.run_step(paused, observe=False))
        finally:
            settled.set()

    driver = threading.Thread(target=drive, name="takeover-paused-call", daemon=True)
    driver.start()
    settled.wait(timeout)
    # Holding SQLite's write lock, the paused call blocks every writer: a few typical calls' time tells a gap
    # call that waits from one that is slow. Holding none that the hook sees (a PostgreSQL row lock is not
    # seen), the gap call returns unless it waits on such a lock: given longer, so that a slow call is not
    # raced by the released one (the order would then change from run to run).
    wait = gap_wait if where and where[0].locked else max(gap_wait, UNSEEN_LOCK_WAIT)
    timer = threading.Timer(wait, release.set) if where else None
    if timer is not None:
        timer.start()
    try:
        hang = replay.run_step(gap, observe=False)
        early = release.is_set()
        gap_first = bool(where) and not outcome
    finally:
        if timer is not None:
            timer.cancel()
        release.set()
        driver.join(timeout + 1.0)
    statements = pause
    try:
        statements = peer.on_thread("disarm", lambda: _disarm(peer.hook))
    except StepHung as stuck:
        hang = hang or stuck
    hang = hang or (outcome[0] if outcome else StepHung(op, timeout, replay.queue_spec))
    if hang is None:
        hang = replay.run_step(gap, act=False)  # the snapshot after both
    paused.observed.update({k: v for k, v in gap.observed.items() if k in ("state", "generation", "lease_until",
                                                                             "rows")})
    return Overlap(paused, gap, pause, where[0] if where else None, statements, gap_first, early, hang)


def _disarm(hook: StatementHook) -> int:
    seen = hook.seen
    hook.__exit__(None, None, None)
    hook.disarm()
    return seen


def _hung(paused: StepResult, gap: StepResult, pause: int, hung: StepHung) -> Overlap:
    for result in (paused, gap):
        result.hung = True
        result.errors.append(str(hung))
    return Overlap(paused, gap, pause, None, 0, False, False, hung)


def statement_counts(replay: Replay, can: tuple[str, ...]) -> dict[str, int]:
    """The most statements each pausable call issued in a short probe on a fresh peer of ``replay`` (a task
    registered, claimed, heartbeat, finished uncertain, resolved, claimed and finished again, a claim of
    nothing, a register again): where a pause can fall, fixed once for a whole explore so that the same
    draws mean the same pause in every example. ``can``: the optional calls the queue has."""
    task = replay.task
    probe: list[dict[str, Any]] = [
        {"step": "register"}, {"step": "claim", "actor": "A"},
        {"step": "extend", "with_generation": 1}, {"step": "finish", "outcome": "uncertain", "with_generation": 1},
        {"step": "resolve", "outcome": "pending", "with_generation": 1}, {"step": "claim", "actor": "A"},
        {"step": "finish", "outcome": "done", "with_generation": 2}, {"step": "claim", "actor": "A"},
        {"step": "register"}]
    peer = Peer(replay)
    try:
        peer.open()
        for spec in probe:
            kind = spec["step"]
            if kind in ("extend", "resolve") and kind not in can:
                continue
            peer.on_thread("probe", lambda k=kind: peer.hook.call(k))
            hung = peer.replay.run_step(StepResult(0, {"t": 0.0, "actor": None, "task": task, **spec}), observe=False)
            if hung is not None:  # the queue does not answer this call: nothing after it can be counted
                raise hung
            peer.on_thread("probe", lambda: peer.hook.__exit__(None, None, None))
    finally:
        peer.close()
    return {k: max(1, n) for k, n in peer.hook.counts.items()}


# -- a scenario file's overlap: a step with ``pause_before_statement``, the step in its gap, a ``resume`` ------
def group_at(steps: list[StepResult], n: int) -> bool:
    """Whether step ``n`` starts an overlap: it has ``pause_before_statement``, the next step is a call and
    the one after it ``resume``. (A shrinker may cut one apart: the pause is then ignored, a lone resume
    does nothing.)"""
    if n + 2 >= len(steps) or "pause_before_statement" not in steps[n].spec:
        return False
    gap = steps[n + 1].spec
    return gap["step"] in PAUSABLE and "pause_before_statement" not in gap and steps[n + 2].spec["step"] == "resume"


def run_group(replay: Replay, steps: list[StepResult], n: int) -> StepHung | None:
    """Run the overlap that starts at step ``n`` (scenario engine): the paused call's answer is its
    ``returns``, the gap call's its own, the snapshot after both the resume step's ``state``,
    ``generation`` and ``lease_until``. The written expectations are those of the paused call first;
    when the calls overlapped, the resume step's ``gap_first`` (the answers and snapshot of the other order,
    written from the spec's model) passes too."""
    paused, gap, resume = steps[n], steps[n + 1], steps[n + 2]
    ov = run_overlap(replay, paused, int(paused.spec["pause_before_statement"]), gap)
    paused.observed.update(overlapped=ov.overlapped, gap_first=ov.gap_first)
    resume.observed.update({k: gap.observed.get(k) for k in ("state", "generation", "lease_until", "rows")})
    resume.observed["returns"] = None
    if ov.hung is not None:
        resume.hung = True
        resume.errors.append(str(ov.hung))
        return ov.hung
    for r in (paused, gap, resume):
        r.compare()
    other = resume.spec.get("gap_first")
    if ov.overlapped and isinstance(other, dict) and any(r.mismatches for r in (paused, gap, resume)):
        shown = {"paused_returns": paused.observed.get("returns"), "gap_returns": gap.observed.get("returns"),
                 **{k: resume.observed.get(k) for k in ("state", "generation", "lease_until")}}
        if all(same(want, shown[k]) for k, want in other.items()):
            for r in (paused, gap, resume):
                r.mismatches = []
    return None
