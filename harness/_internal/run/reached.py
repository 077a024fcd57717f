"""The cells a run has reached so far, read from its history as it grows: what the nemesis steers by.

Why a second, online reckoning beside the checker's (takeover._internal.checker.model_coverage): the checker reads
the finished history with pandas; the nemesis needs, in the middle of the run and on its own loop, which
cells (takeover._internal.coverage_space) the calls so far fell in, so that its next aimed fault goes where the run
has not been (takeover._internal.run.aim_unreached). So the coordinator reads the history file from where it left
off (every record is one line, appended with one write: takeover._internal.history) and places each call the way
the checker does: a finish, heartbeat, resolve or register against the task's state, generation and
lease as the answers completed before its invoke left them; a claim against the task it returned (the
caller's earlier generation of it) or, returning nothing, against the caller's last task. It is an
estimate the steering needs only roughly (a claim is placed at its completion, not its invoke); the
verdict's figure is the checker's, from the whole history.

Cheap: a 20 s run writes a few thousand records; each update parses only the new ones.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from takeover._internal import coverage_space as cs

CALLS = ("register", "claim", "finish", "extend", "resolve")


@dataclass
class _Task:
    state: str = "absent"
    gen: int = 0
    lease_until: float | None = None


class Reached:
    """The cells reached so far by the calls in the history at ``path`` (:meth:`update` reads on)."""

    def __init__(self, path: str | os.PathLike[str], lease: float | None) -> None:
        self.path = Path(path)
        self.tick = cs.stress_tick(lease)
        self.cells: set[str] = set()
        self._offset = 0
        self._rest = b""
        self._tasks: dict[str, _Task] = {}
        self._last: dict[str, tuple[str, int]] = {}  # worker -> its last claimed (task, gen)
        self._held: dict[tuple[str, str], int] = {}  # (worker, task) -> the latest generation it claimed
        self._open: dict[tuple[int, str, str], dict[str, Any]] = {}  # (process, f, task for registers) -> invoke

    def update(self) -> set[str]:
        """Read the records written since the last update; the cells reached so far."""
        try:
            with self.path.open("rb") as fh:
                fh.seek(self._offset)
                data = fh.read()
        except OSError:
            return self.cells
        self._offset += len(data)
        lines = (self._rest + data).split(b"\n")
        self._rest = lines.pop()  # a line not written whole yet (none: every record is one write)
        for line in lines:
            try:
                rec = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue  # a torn last line of a killed process: nothing to place
            if isinstance(rec, dict) and rec.get("f") in CALLS:
                self._record(rec)
        return self.cells

    def task(self, tid: str) -> tuple[str, int, float | None]:
        """What the history says of a task now: its state, generation and lease (absent: never registered)."""
        t = self._tasks.get(tid, _Task())
        return t.state, t.gen, t.lease_until

    # -- placing ----------------------------------------------------------------------------------------
    def _record(self, rec: dict[str, Any]) -> None:
        f, kind, process = rec["f"], rec.get("type"), int(rec.get("process", 0))
        key = (process, f, str(rec.get("task")) if f == "register" else "")
        if kind == "invoke":
            self._open[key] = rec
            if f != "claim":
                self._place_call(rec)
            return
        inv = self._open.pop(key, None)
        if inv is None:
            return
        if f == "claim":
            self._place_claim(inv, rec)
        if kind == "ok":
            self._apply(f, inv, rec)

    def _place_call(self, rec: dict[str, Any]) -> None:
        f, tid = rec["f"], rec.get("task")
        if tid is None:
            return
        t = self._tasks.get(str(tid), _Task())
        if f == "finish":
            op = "finish_uncertain" if rec.get("outcome") == "uncertain" else "finish_done"
        else:
            op = f
        now = rec.get("now", rec.get("time"))
        caller = cs.caller_of(t.state, None if f == "register" else rec.get("gen"), t.gen, now, t.lease_until)
        self.cells.add(cs.classify(op, t.state, caller, now, t.lease_until, self.tick))

    def _place_claim(self, inv: dict[str, Any], rec: dict[str, Any]) -> None:
        worker = str(inv.get("worker"))
        now = inv.get("now", inv.get("time"))
        if rec.get("type") == "ok" and rec.get("task") is not None:
            tid = str(rec["task"])
            prev = self._held.get((worker, tid))
        elif rec.get("type") == "fail" and worker in self._last:
            tid, prev = self._last[worker]
        else:
            return
        t = self._tasks.get(tid, _Task())
        state = "pending" if t.state == "absent" else t.state
        caller = cs.caller_of(state, prev, t.gen, now, t.lease_until)
        self.cells.add(cs.classify("claim", state, caller, now, t.lease_until, self.tick))

    def _apply(self, f: str, inv: dict[str, Any], rec: dict[str, Any]) -> None:
        """An answer that moved a task in the model (takeover._internal.checker.model_coverage._effects)."""
        tid = rec.get("task", inv.get("task"))
        if tid is None:
            return
        t = self._tasks.setdefault(str(tid), _Task())
        if f == "register":
            if t.state == "absent":
                t.state, t.gen = "pending", 0
        elif f == "claim":
            gen = int(rec.get("gen") or 0)
            t.state, t.gen, t.lease_until = "running", max(t.gen, gen), rec.get("lease_until")
            worker = str(inv.get("worker"))
            self._last[worker] = (str(tid), gen)
            self._held[(worker, str(tid))] = gen
        elif f == "extend":
            if rec.get("lease_until") is not None:
                t.lease_until = rec["lease_until"]
        elif f == "finish":
            if str(rec.get("value", "true")).lower() not in ("false", "0", "null"):
                t.state = "uncertain" if inv.get("outcome") == "uncertain" else "done"
        elif f == "resolve":
            t.state = "pending" if inv.get("value") == "pending" else "done"
