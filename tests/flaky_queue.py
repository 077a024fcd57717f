"""Test queues for the stress-run robustness tests (importable by spawned workers via PYTHONPATH).

``FlakyQueue`` is the reference queue that fails like SQLite under contention: every few calls
it raises ``database is locked`` *after* or *before* doing the work, so the harness must record an
``info`` (outcome unknown) and go on, never crash.
"""

from __future__ import annotations

import os
import sqlite3
import time

from takeover.queues.sqlite_lease import SQLiteLeaseQueue


class FlakyQueue(SQLiteLeaseQueue):
    # One counter per method: with a shared counter, an even period and alternating claim/finish
    # calls could land every failure on the same method, so a run might never see a failing finish.
    CLAIM_EVERY = 5
    FINISH_EVERY = 4

    def __init__(self, db_path: str) -> None:
        super().__init__(db_path)
        self._claims = 0
        self._finishes = 0

    def claim(self, worker, now, lease):
        self._claims += 1
        if self._claims % self.CLAIM_EVERY == 0:
            raise sqlite3.OperationalError("database is locked")
        return super().claim(worker, now, lease)

    def finish(self, task_id, generation, outcome, now):
        accepted = super().finish(task_id, generation, outcome, now)
        self._finishes += 1
        if self._finishes % self.FINISH_EVERY == 0:  # committed, but the caller never learns it: indeterminate
            raise sqlite3.OperationalError("database is locked")
        return accepted


class NoFinishQueue:
    """Fails the contract: no finish()."""

    def __init__(self, db_path: str) -> None:
        self._inner = SQLiteLeaseQueue(db_path)
        self.register = self._inner.register
        self.claim = self._inner.claim
        self.snapshot = self._inner.snapshot
        self.close = self._inner.close


class HangingSnapshotQueue(SQLiteLeaseQueue):
    """snapshot() never returns inside a run (it works on the scratch file ``stress`` checks first):
    the coordinator must give up on it after the drain timeout, and Ctrl-C must still stop the run."""

    def snapshot(self):
        if os.environ.get("TAKEOVER_RUN_DIR"):
            time.sleep(10**6)
        return super().snapshot()
