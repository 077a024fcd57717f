"""Which model-coverage cells explore's steps reached, and the lean toward the ones it has not.

Why the shared cell space (:mod:`takeover._internal.coverage_space`) and not one of explore's own: a cell
explore reached and a cell a stress run reached must be the same cell, so the figures add up and a
planted bug or a mutant can name the cells it needs once. Explore classifies every step from its
model just before the step (the task's state, the caller's generation against the task's, ``now``
against the lease, explore's tick of 1/1024 s) and, after each step, the snapshot's row of every
registered task.

Why the lean changes only between batches of examples (:meth:`Coverage.new_batch`): within one
Hypothesis run the same choices must mean the same draws (Hypothesis checks it, and replays and
shrinks a departure by feeding them again), so the weights are fixed for a batch and recomputed from
every cell reached so far before the next.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from takeover._internal import coverage_space as space
from takeover._internal.replay.model import TaskState

LEAN = 3.0  # how much more likely a kind of call is when every one of its possible cells is still unreached


def state_of(s: TaskState | None) -> str:
    return "absent" if s is None or s.state is None else s.state


def op_of(step: dict[str, Any]) -> str | None:
    kind = step["step"]
    if kind == "finish":
        return f"finish_{step['outcome']}"
    return kind if kind in space.OPS else None


def step_cell(step: dict[str, Any], before: TaskState | None, held: int | None, tick: float) -> str | None:
    """The cell of one step (None for a reopen): ``before`` is the task's model state just before it
    (for a claim, the task it returned), ``held`` the generation the caller holds of that task (a
    finish's, extend's or resolve's ``with_generation``; a claim's: the latest its actor was given)."""
    op = op_of(step)
    if op is None or before is None:
        return None
    state = state_of(before)
    now = float(step["t"])
    caller = "never"
    if op not in ("register", "snapshot"):
        caller = space.caller_of(state, held, before.generation, now, before.lease_until)
    return space.classify(op, state, caller, now, before.lease_until, tick)


class Coverage:
    """Hits per cell (``seen``), and the unreached share of each operation's cells when the current
    batch began (what the lean reads)."""

    def __init__(self, extensions: Iterable[str] = space.ALL_EXTENSIONS) -> None:
        self.extensions = tuple(extensions)
        self.possible = space.possible(self.extensions)
        self.seen: Counter[str] = Counter()
        # Two calls at once (explore.overlap): "claim@3/locked/claim" is a claim paused before its statement 3
        # holding SQLite's write lock while a claim ran in the gap (unlocked: holding none; ended: it returned
        # before that statement).
        self.overlaps: Counter[str] = Counter()
        self._by_op = {op: [c for c in self.possible if c.startswith(f"{op}/")] for op in space.OPS}
        self.lean: dict[str, float] = {}
        self.lean_caller: dict[tuple[str, str], float] = {}
        self.new_batch()

    def set_extensions(self, extensions: Iterable[str]) -> None:
        """The optional methods the queue has (known once it is open): their cells only are possible."""
        ext = tuple(extensions)
        if ext != self.extensions:
            self.extensions = ext
            self.possible = space.possible(ext)
            self._by_op = {op: [c for c in self.possible if c.startswith(f"{op}/")] for op in space.OPS}

    def merge(self, example: Counter[str], overlaps: Counter[str] | None = None) -> None:
        self.seen.update(example)
        self.overlaps.update(overlaps or {})

    def new_batch(self) -> None:
        """Fix the lean for the next batch: the share of each operation's cells not reached so far."""
        self.lean = {op: _unreached(mine, self.seen) for op, mine in self._by_op.items()}
        self.lean_caller = {(op, caller): _unreached([c for c in mine if c.split("/")[2] == caller], self.seen)
                            for op, mine in self._by_op.items() for caller in space.CALLERS}
        self.unreached = frozenset(c for c in self.possible if not self.seen.get(c))

    def weight(self, kind: str, base: int, outcomes: tuple[str, ...] = ()) -> int:
        """``base`` leaned toward kinds whose cells are still unreached (a finish: either outcome's)."""
        ops = [f"finish_{o}" for o in outcomes] if kind == "finish" else [kind]
        share = max(self.lean.get(op, 0.0) for op in ops)
        return max(1, round(base * (1 + LEAN * share)))

    def caller_weight(self, ops: tuple[str, ...], callers: tuple[str, ...], base: int) -> int:
        """``base`` leaned toward callers (holder, stale, expired, never) whose cells of ``ops`` are
        still unreached: a stale holder's heartbeat once every holder's has been seen."""
        share = max((self.lean_caller.get((op, c), 0.0) for op in ops for c in callers), default=0.0)
        return max(1, round(base * (1 + LEAN * share)))

    def cell_weight(self, cell: str | None, base: int) -> int:
        """``base`` leaned toward a cell not reached when the batch began (LEAN more for it)."""
        return round(base * (1 + LEAN)) if cell is not None and cell in self.unreached else base

    def to_json(self) -> dict[str, Any]:
        seen = self.seen
        important = space.important(self.extensions)
        return {
            "reached": sum(1 for c in self.possible if seen.get(c)),
            "total": len(self.possible),
            "important_reached": sum(1 for c in important if seen.get(c)),
            "important_total": len(important),
            "cells": {c: seen[c] for c in self.possible if seen.get(c)},
            "unreached": [c for c in self.possible if not seen.get(c)],
            "overlaps": dict(sorted(self.overlaps.items())),
        }


def _unreached(cells: list[str], seen: Counter[str]) -> float:
    """The share of ``cells`` not reached (0 for none)."""
    return sum(1 for c in cells if not seen.get(c)) / len(cells) if cells else 0.0
