"""Which aim_unreached window reaches a cell of model coverage, and why a cell no window reaches is left.

Why a module of its own, below both the runner and the checker: the nemesis' aim_unreached kind
(takeover._internal.run.aim_unreached) aims by it, and the checker's console names each cell never reached with the
reason, and neither may import the other. Pure, like takeover._internal.coverage_space.
"""

from __future__ import annotations

from collections.abc import Iterable

from takeover._internal import coverage_space as cs

WAYS = ("call", "hold", "beat", "lost_stale")


def way(cell: str) -> str | None:
    """How a window reaches ``cell`` (one of :data:`WAYS`), or None when no window can: a claim (a worker
    claims when it has no task, and the queue picks what it returns), a snapshot (the probes list every
    task), a stale caller of a pending task (only a resolve back to pending makes one, and only when the
    ledger says the action never happened), and a running task's holder's own finish inside its lease
    (every task's ordinary finish)."""
    op, state, caller, time_ = cs.parse(cell)
    if op in ("claim", "snapshot") or (state == "pending" and caller == "stale"):
        return None
    if state != "running" or op == "register" and time_ == "inside":
        return "call"
    if time_ in ("edge", "past"):
        return "hold"
    if caller == "holder":
        return "beat" if op == "extend" else "call" if op == "resolve" else None
    if op == "finish_uncertain" and caller == "stale":
        return "lost_stale"
    return "call"


def aimable(extensions: Iterable[str]) -> list[str]:
    """The possible cells a window can aim at, for a queue with these optional methods."""
    return [c for c in cs.possible(extensions) if way(c) is not None]


def why_not(cell: str) -> str:
    """Why no aimed fault can reach ``cell``, in words, for the console's list of cells never reached."""
    op, state, caller, time_ = cs.parse(cell)
    if op == "claim":
        if state == "pending" and caller == "stale":
            return "a worker claims a task it held back only after a resolve sent it to pending"
        if state == "running" and caller == "never":
            if time_ == "inside":
                return "a correct queue never hands out a live lease, and no aimed fault makes a claim return one"
            return "only a takeover by a worker that never held the task lands here, and none came at that time"
        return (
            "a claim lands on the caller's own earlier task only when it returns nothing (or that task again), "
            "and tasks kept arriving: no aimed fault makes a worker claim while its last task is in that state"
        )
    if state == "pending" and caller == "stale":
        return (
            "only a resolve back to pending makes a stale caller of a pending task, and the ledger said "
            "every uncertain task's action happened (so each resolved to done)"
        )
    if op == "snapshot":
        return "the probes list every task as it is: no task was in that state at a probe"
    return "no aimed fault makes that call (a running task's holder finishes inside its lease every time)"
