"""The ``freeze_in_call`` aimed fault: a worker frozen *inside* a queue call, between two of its statements.

Why: every other freeze stops a worker before or after a whole call. A queue whose finish reads the
row, checks it in Python and then writes it by id in a second autocommit statement passes all of
them, and breaks as soon as another worker takes the task over between its two statements. This
fault puts a worker exactly there, without touching the queue's code, with the statement hook of
:mod:`takeover._internal.failpoints` on every connection the worker opens:

1. the nemesis arms a freeze on the phase board for one worker: "the next ``finish`` (or ``claim``,
   ``extend``), before one of its statements", which one drawn from the seed as a fraction of the
   statements that call issues (the worker learns each call's statement count from the calls it
   made so far, and arms its hook once it knows);
2. the worker, at that statement, writes an ``info failpoint`` record (the call, the statement's
   number and text: "finish before statement 2 of 2: UPDATE ...") and stops itself with SIGSTOP;
3. the nemesis records the freeze as a pause of this kind, waits until another worker has taken the
   task over (for a claim: until another claim returned), then resumes it: the rest of the call
   runs against a task someone else now holds. A queue that holds a lock across its statements
   lets nobody in: after the lease and a margin the worker is resumed and the window counted as
   missed, with that reason (not a bug).

SQLite's write lock is the exception: a worker stopped while it holds it stops every other writer,
the run's own coordinator included (its registrations, and so the loop that would resume the
worker). The worker never stops there; it passes to the next statement of the call that is outside
the lock, and a call with none ends the window as missed ("held the write lock ...").

Everything is undone whatever ends the window: the arm withdrawn, the worker resumed (also one that
stopped itself just as the window gave up on it).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Generator
from typing import Any

from takeover._internal.config import RunConfig
from takeover._internal.failpoints import Point, StatementHook
from takeover._internal.history import HistoryWriter
from takeover._internal.run.aimed import AimedFaults, Frozen, Missed
from takeover._internal.run.board_layout import FREEZE_ARM, FREEZE_AT, FREEZE_OF, FREEZE_OP, FREEZE_SEEN, FREEZE_SPOT
from takeover._internal.run.phases import HOLDING, PhaseBoard, task_id
from takeover._internal.run.supervision import wait_stopped

KIND = "freeze_in_call"
CALL_OPS = ("claim", "finish", "extend", "register")  # the board carries the call by its index here
POLL = 0.0005
SETTLE = 0.1  # how long a window that gave up waits for a worker that stopped itself just then
RETURN_WAIT = 1.0  # how long a resumed worker's call may take to return (the slot stays reserved)
# Where the nemesis finds a worker whose next call of each kind is the one to freeze in.
TARGET_PHASES = {"finish": ("working", "acting", "acted"), "extend": ("working",),
                 "claim": ("idle", "claiming", "working", "acting", "acted")}  # fmt: skip


def statement_index(count: int, spot: float) -> int:
    """Which statement (1-based) of a call that issues ``count`` to stop before, for ``spot`` in [0, 1):
    one after the first when there are several (between two of the call's own statements), else the one."""
    if count < 2:
        return 1
    return 2 + min(count - 2, int(spot * (count - 1)))


# -- the worker's side ---------------------------------------------------------------------------------
class CallFreezer:
    """In a worker process: the statement hook on its queue's connections, and the freezes armed for it."""

    def __init__(self, board: PhaseBoard, slot: int, hist: HistoryWriter, worker: str) -> None:
        self.board = board
        self.slot = slot
        self.hist = hist
        self.worker = worker
        self.hook = StatementHook()
        self._taken = 0  # the last request taken (armed, or served), until the board withdraws it (0: none)
        self._args: tuple[Any, ...] = ()  # the call under way's arguments, for the record

    def open(self, opener: Callable[[], Any]) -> Any:
        """Open the queue with every connection it makes watched, and wrap its calls (:class:`WatchedQueue`)."""
        with self.hook.watching():
            queue = opener()
        return WatchedQueue(queue, self)

    def scoped(self, op: str, method: Callable[..., Any]) -> Callable[..., Any]:
        """``method`` (the queue's ``op``) as the worker calls it. The hot path, taken by nearly every call:
        one read of the board (no new request) and the hook saying it has nothing to watch."""
        hook, array, arm = self.hook, self.board.array, self.board.slot_index(self.slot, FREEZE_ARM)

        def call(*args: Any, **kwargs: Any) -> Any:
            if array[arm] != self._taken:
                self._before()
            if hook.idle(op):
                return method(*args, **kwargs)
            self._args = args
            try:
                with hook.call(op):
                    return method(*args, **kwargs)
            finally:
                if hook.passed is not None:  # the armed statement came only under the write lock
                    hook.passed = None
                    self.board.set_field(self.slot, FREEZE_SEEN, -self._taken)

        return call

    def _before(self) -> None:
        """Before a call, when the board's request changed: take the new one (or its withdrawal). A request
        waits until the call's statements are known: a call of two or more seen, or every one of LEARN
        calls a single statement (early calls may be cut short: a refused check-then-act finish is its
        SELECT alone, and a freeze before it would be no freeze inside the call)."""
        request = int(self.board.field(self.slot, FREEZE_ARM))
        if request == self._taken:
            return
        if request == 0:
            self.hook.disarm()
            self._taken = 0
            return
        op = CALL_OPS[int(self.board.field(self.slot, FREEZE_OP))]
        count = self.hook.counts.get(op, 0)
        if count >= 2 or (count and self.hook.learned(op)):
            self.hook.arm(op, statement_index(count, self.board.field(self.slot, FREEZE_SPOT)), self._stop)
            self._taken = request

    def _stop(self, point: Point) -> bool:
        """The trap: stop this process before ``point`` (not under SQLite's write lock: try the next one)."""
        if point.locked:
            return False
        request = self._taken
        board, slot = self.board, self.slot
        if int(board.field(slot, FREEZE_ARM)) != request:
            return True  # withdrawn: the window gave up on this worker
        count = max(self.hook.counts.get(point.op, 0), point.index)
        where = f"{point.op} before statement {point.index} of {count}"
        self.hist.write("info", "failpoint", worker=self.worker, value=where, detail=point.sql[:300],
                        **_held(point.op, self._args))  # fmt: skip
        board.set_field(slot, FREEZE_AT, point.index)
        board.set_field(slot, FREEZE_OF, count)
        board.set_field(slot, FREEZE_SEEN, request)
        if int(board.field(slot, FREEZE_ARM)) == request:  # not withdrawn meanwhile (see _settle)
            os.kill(os.getpid(), signal.SIGSTOP)
        board.set_field(slot, FREEZE_SEEN, 0)
        return True  # served: ``_taken`` keeps the request, so it is not armed again before it is withdrawn


def _held(op: str, args: tuple[Any, ...]) -> dict[str, Any]:
    """The task (and generation) a call is about, from its arguments, as history fields."""
    if op in ("finish", "extend") and len(args) >= 2:
        return {"task": args[0], "gen": args[1]}
    if op == "register" and args and isinstance(args[0], str):
        return {"task": args[0]}
    return {}


class WatchedQueue:
    """The queue as the worker calls it: each contract call it offers runs inside the hook's ``call``
    scope (``register_many`` counts as ``register``); everything else is the queue's own attribute."""

    def __init__(self, queue: Any, freezer: CallFreezer) -> None:
        self._queue = queue
        for name in (*CALL_OPS, "register_many"):
            method = getattr(queue, name, None)
            if callable(method):  # only what the queue has: has_extension() must see what it saw
                setattr(self, name, freezer.scoped(name.removesuffix("_many"), method))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._queue, name)


def watched(
    cfg: RunConfig, board: PhaseBoard, slot: int, hist: HistoryWriter, worker: str, opener: Callable[[], Any]
) -> Any:
    """The worker's queue: watched when the run asks for freezes inside calls, else exactly what
    ``opener`` returns (a run without them pays nothing)."""
    if cfg.faults.get(KIND, 0.0) <= 0:
        return opener()
    return CallFreezer(board, slot, hist, worker).open(opener)


# -- the nemesis' side ---------------------------------------------------------------------------------
Script = Generator[float, None, None]


class FreezeInCall:
    """The script of one window (``AimedFaults`` runs it as its ``freeze_in_call`` kind). The calls are
    dealt from a seeded deck, so a short run sees each: finish twice a round (the call that commits a
    task's end, where a stale write does its harm; and a claim under SQLite's write lock ends its
    window at once), claim, and extend when workers heartbeat."""

    def __init__(self, cfg: RunConfig) -> None:
        self.cfg = cfg
        self.ops = ("finish", "finish", "claim", "extend") if cfg.heartbeat > 0 else ("finish", "finish", "claim")
        self._deck: list[str] = []
        self._requests = 0

    def _next_op(self, aimed: AimedFaults) -> str:
        if not self._deck:
            self._deck = list(self.ops)
            aimed.rngs[KIND].shuffle(self._deck)
        return self._deck.pop()

    def script(self, aimed: AimedFaults, deadline: float, fields: dict[str, Any]) -> Script:
        board = aimed.board
        op = self._next_op(aimed)
        spot = aimed.rngs[KIND].random()
        fields["op"] = op
        slot = yield from self._target(aimed, op, deadline)
        process, pid = board.read(slot).process, board.read(slot).pid
        self._requests += 1
        request = self._requests
        frozen: Frozen | None = None
        aimed.reserved.add(slot)
        try:
            board.set_field(slot, FREEZE_OP, CALL_OPS.index(op))
            board.set_field(slot, FREEZE_SPOT, spot)
            board.set_field(slot, FREEZE_SEEN, 0)
            board.set_field(slot, FREEZE_ARM, request)
            while True:  # until the worker has stopped itself inside the call
                seen = int(board.field(slot, FREEZE_SEEN))
                if seen == -request:
                    raise Missed(f"the {op} call held SQLite's write lock from the armed statement to its end: "
                                 "nothing can run between those statements")  # fmt: skip
                if board.read(slot).process != process:
                    raise Missed(f"the worker died before its {op} call")
                if seen == request and wait_stopped(pid, 0.0):
                    break
                if time.time() > deadline:
                    raise Missed(f"the worker made no {op} call that reached the armed statement in time")
                yield POLL
            view = board.read(slot)
            at, of = int(board.field(slot, FREEZE_AT)), int(board.field(slot, FREEZE_OF))
            frozen = aimed._freeze(slot, view, KIND, max(view.lease_until, time.time()) + self.cfg.lease - time.time())
            started = time.time()
            where = f"inside {op} before statement {at} of {of}"
            fields.update(worker=f"w{slot}", statement=at, statements=of)
            if view.task >= 0 and op != "claim":
                fields.update(task=task_id(view.task), gen=view.gen, lease_until=view.lease_until)
            # The bound: two leases (at least a second) past the frozen holder's lease, or past the freeze for a
            # claim: on a loaded machine the takeover of an expired task can take most of a lease.
            give_up = max(view.lease_until, started) + max(1.0, 2 * self.cfg.lease)
            if op != "claim":  # as stale_return's: the claim gate's holds keep off it, kills off its taker
                aimed._takeovers[KIND] = (view.lease_until, view.task)
            while (other := self._interleaved(aimed, op, slot, view, started)) is None:
                if time.time() > give_up:
                    what = "took the task over" if op != "claim" else "completed a claim"
                    raise Missed(f"no other worker {what} within two leases while one was frozen inside {op} "
                                 f"(a queue that keeps others out across its statements: not a bug)")  # fmt: skip
                yield POLL
            held = time.time() - started
            since = board.read(slot).since
            aimed._thaw(frozen)
            aimed.reserved.add(slot)  # until the call returned: no kill or pause may cut into it
            end = time.time() + RETURN_WAIT
            while board.read(slot).since == since and board.read(slot).process == process and time.time() < end:
                yield POLL
            fields["detail"] = f"w{slot} frozen {where} for {held:.2f} s while {other}"
        finally:
            aimed._takeovers.pop(KIND, None)
            board.set_field(slot, FREEZE_ARM, 0)
            if frozen is not None:
                aimed._thaw(frozen)
            else:
                self._settle(slot, board, request, pid)
            aimed.reserved.discard(slot)

    def _target(self, aimed: AimedFaults, op: str, deadline: float) -> Generator[float, None, int]:
        """A live worker nobody froze, whose next call of ``op`` is the one (a holder for finish and
        extend): drawn from the aimed faults' target stream."""
        phases = TARGET_PHASES.get(op, ("idle",))
        while True:
            slots: list[int] = []
            # Another free worker besides it (not frozen, paused or reserved): someone must be able to get in.
            if aimed._idle_workers() >= 2:
                slots = [s for s in aimed.hands.candidates(phases) if s not in aimed.reserved and not aimed.guards(s)]
            if op != "claim":
                slots = [s for s in slots if aimed.board.read(s).lease_until > time.time() + 0.005]
            if slots:
                slots.sort()
                return aimed.rngs["targets"].choice(slots)
            if time.time() > deadline:
                raise Missed(f"no worker was in phase {'/'.join(phases)} with another one free, in time")
            yield POLL

    @staticmethod
    def _interleaved(aimed: AimedFaults, op: str, slot: int, view: Any, started: float) -> str | None:
        """What another worker did meanwhile that the frozen call now runs into, in words; None yet."""
        board = aimed.board
        if op == "claim":
            for s in aimed.hands.candidates(HOLDING):
                other = board.read(s)
                if s != slot and other.since > started and other.task >= 0:
                    return f"w{s} claimed {task_id(other.task)} (gen {other.gen})"
            return None
        taker = aimed._holder_of(view.task, view.gen, exclude=slot)
        if taker is None:
            return None
        new = board.read(taker)
        return f"w{taker} took {task_id(view.task)} over (gen {new.gen})"

    @staticmethod
    def _settle(slot: int, board: PhaseBoard, request: int, pid: int) -> None:
        """The arm is withdrawn; a worker that stopped itself for it all the same (it read the arm just
        before) is resumed here, once the kernel shows it stopped (a SIGCONT before the stop is lost)."""
        end = time.monotonic() + SETTLE
        while int(board.field(slot, FREEZE_SEEN)) == request and time.monotonic() < end:
            if wait_stopped(pid, 0.0):
                os.kill(pid, signal.SIGCONT)
                return
            time.sleep(0.001)
