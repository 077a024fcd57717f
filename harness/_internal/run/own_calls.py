"""The coordinator's own calls into the queue (aim_unreached's ``call`` and ``hold`` windows), recorded.

Why the coordinator calls at all: a finish or a heartbeat with a generation no claim returned, or on a task
that has ended, is a situation of the spec (takeover._internal.coverage_space) that no worker ever creates, since a
worker only passes the generation its claim returned, and a queue that answers yes there is wrong the same
way (a finish fenced by the state alone accepts any generation). The calls are recorded exactly as a worker
records its own (invoke, then ok, fail or info: docs/history.md) under the coordinator's process 0, so the
checker judges them like any other: an accepted finish of a generation this process never claimed breaks
``finish_within_lease`` ("no claim of this process returned that generation"), which is why the coordinator
makes only calls a correct queue refuses, and resolves an uncertain task only to what the ledger says
happened (as ``takeover reconcile`` does).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from takeover._internal import answers
from takeover._internal.history import HistoryWriter, error_text

# The ledger's question (takeover._internal.run.ledger): did an action with this key happen?
_PERFORMED = "SELECT 1 FROM actions WHERE key = ? AND performed = 1 LIMIT 1"


class OwnCalls:
    """``ask(queue, op, task, gen)``: one recorded call; ``call(name, fn, *args)`` makes it (with a deadline)."""

    def __init__(self, hist: HistoryWriter, lease: float, ledger: Path, call: Callable[..., Any],
                 spec: str = "") -> None:  # fmt: skip
        self.spec = spec  # the queue's --queue, for the words of a malformed answer (takeover._internal.answers)
        self.hist = hist
        self.lease = lease
        self.ledger = ledger
        self.call = call

    def happened(self, task: str) -> bool | None:
        """What the ledger says of the task's action (read-only; None when it cannot say)."""
        try:
            conn = sqlite3.connect(f"{self.ledger.resolve().as_uri()}?mode=ro", uri=True, timeout=0.2)
            try:
                return conn.execute(_PERFORMED, (task,)).fetchone() is not None
            finally:
                conn.close()
        except sqlite3.Error:
            return None

    def ask(self, queue: Any, op: str, task: str, gen: int) -> bool | float | None:
        """``op`` (finish_done, finish_uncertain, extend, resolve) on ``task`` at ``gen``: the queue's answer
        (None when it raised or gave up), recorded as invoke and completion."""
        now = time.time()
        hist = self.hist
        if op == "resolve":
            happened = self.happened(task)
            if happened is None:
                return None
            resolution = "done" if happened else "pending"
            hist.write("invoke", "resolve", task=task, gen=gen, value=resolution, now=now)
            try:
                accepted = answers.resolve(self.call("resolve", queue.resolve, task, gen, resolution, now), self.spec)
            except Exception as exc:  # noqa: BLE001 - unknown whether it took effect
                self._failed("resolve", exc, task=task, gen=gen, value=resolution)
                return None
            if accepted is True:
                hist.write("ok", "resolve", task=task, gen=gen, value=resolution)
            else:
                hist.write("fail", "resolve", task=task, gen=gen, value=resolution, error="rejected")
            return accepted is True
        if op == "extend":
            hist.write("invoke", "extend", task=task, gen=gen, now=now, lease=self.lease)
            try:
                new = answers.extend(self.call("extend", queue.extend, task, gen, now, self.lease), self.spec)
            except Exception as exc:  # noqa: BLE001
                self._failed("extend", exc, task=task, gen=gen)
                return None
            if new is None:
                hist.write("fail", "extend", task=task, gen=gen, error="lost")
                return None
            hist.write("ok", "extend", task=task, gen=gen, lease_until=float(new))
            return float(new)
        outcome = "uncertain" if op == "finish_uncertain" else "done"
        hist.write("invoke", "finish", task=task, gen=gen, outcome=outcome, now=now)
        try:
            accepted = answers.finish(self.call("finish", queue.finish, task, gen, outcome, now), self.spec)
        except Exception as exc:  # noqa: BLE001
            self._failed("finish", exc, task=task, gen=gen, outcome=outcome)
            return None
        if accepted:
            hist.write("ok", "finish", task=task, gen=gen, outcome=outcome, value="true")
        else:
            hist.write("fail", "finish", task=task, gen=gen, outcome=outcome, error="rejected")
        return bool(accepted)

    def _failed(self, f: str, exc: Exception, **fields: Any) -> None:
        """A call that raised (its outcome unknown: ``info``) or answered what the contract does not allow: then
        also an ``answer`` record, which the check answers_well_formed reads, as a worker records its own."""
        if not isinstance(exc, answers.MalformedAnswer):
            self.hist.write("info", f, error=error_text(exc), **fields)
            return
        self.hist.write("info", f, error=exc.what[:300], **fields)
        rest = {k: v for k, v in fields.items() if k != "value"}  # a resolve's resolution: the record's value is f
        self.hist.write("info", answers.ANSWER_RECORD, value=f, detail=exc.what, **rest)
