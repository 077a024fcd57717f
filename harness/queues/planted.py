"""Queues with one planted bug each: the checker's own test (Hypothesis-style ``tests/quality``).

Why: a checker that never fails proves nothing. Each queue below is the reference queue with one
realistic mistake, the kind real queues have shipped (completion by row id alone, a missing state
filter, an off-by-one in a snapshot). ``takeover selftest`` runs a short stress run against each
and must see it caught, and must see the reference queue pass. Together they cover every invariant.

Use one as ``--queue takeover.queues.planted:NAME``; :data:`PLANTED` lists them with the invariants
expected to catch each.
"""

from __future__ import annotations

import zlib

from takeover._internal.coverage_space import expand
from takeover._internal.sqlite_util import begin_immediate, write_transaction
from takeover.contract import OUTCOMES, Claim, SnapshotRow
from takeover.queues.sqlite_lease import SQLiteLeaseQueue


class _Planted(SQLiteLeaseQueue):
    """The reference queue's claim and finish, with the SQL split into overridable steps."""

    PICK_EXPIRED = ("SELECT task_id FROM tasks WHERE state = 'running' AND lease_until <= ? "
                    "ORDER BY lease_until LIMIT 1")
    PICK_PENDING = "SELECT task_id FROM tasks WHERE state = 'pending' LIMIT 1"
    TAKE = ("UPDATE tasks SET state = 'running', generation = generation + 1, lease_until = ?, worker = ? "
            "WHERE task_id = ? RETURNING generation, lease_until")
    FINISH = ("UPDATE tasks SET state = ?, lease_until = NULL "
              "WHERE task_id = ? AND generation = ? AND state = 'running' AND ? < lease_until")

    def _pick(self, now: float, lease: float) -> tuple[str] | None:
        conn = self._conn
        return conn.execute(self.PICK_EXPIRED, (now,)).fetchone() or conn.execute(self.PICK_PENDING).fetchone()

    def _finish_params(self, task_id: str, generation: int, outcome: str, now: float) -> tuple[object, ...]:
        return (outcome, task_id, generation, now)

    def claim(self, worker: str, now: float, lease: float) -> Claim | None:
        with write_transaction(self._conn) as conn:
            row = self._pick(now, lease)
            if row is None:
                return None
            generation, lease_until = conn.execute(self.TAKE, (now + lease, worker, row[0])).fetchone()
        return row[0], generation, lease_until

    def finish(self, task_id: str, generation: int, outcome: str, now: float) -> bool:
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, got {outcome!r}")
        conn = self._conn
        begin_immediate(conn)
        try:
            accepted = conn.execute(self.FINISH, self._finish_params(task_id, generation, outcome, now)).rowcount
            accepted = self._after_finish(task_id, accepted == 1)
        except BaseException:
            self._rollback()
            raise
        return accepted

    def _after_finish(self, task_id: str, accepted: bool) -> bool:
        self._conn.execute("COMMIT")
        return accepted


class FinishIgnoresGeneration(_Planted):
    """Completion by task id alone (most database queues): a stale holder's finish is accepted
    while the new holder's lease is valid. Caught by ``no_stale_commit``."""

    FINISH = ("UPDATE tasks SET state = ?, lease_until = NULL "
              "WHERE task_id = ? AND state = 'running' AND ? < lease_until")

    def _finish_params(self, task_id: str, generation: int, outcome: str, now: float) -> tuple[object, ...]:
        return (outcome, task_id, now)


class FinishIgnoresLease(_Planted):
    """Checks the generation but not the clock: a holder that outlived its lease still commits if
    nobody reclaimed in between. Caught by ``finish_within_lease``."""

    FINISH = ("UPDATE tasks SET state = ?, lease_until = NULL "
              "WHERE task_id = ? AND generation = ? AND state = 'running' AND ? = ?")

    def _finish_params(self, task_id: str, generation: int, outcome: str, now: float) -> tuple[object, ...]:
        return (outcome, task_id, generation, now, now)


class ReclaimsTerminal(_Planted):
    """The expired-lease pick forgets ``state = 'running'`` and finish keeps the old lease, so a
    done task comes back once its lease time passes. Caught by ``no_reclaim_after_terminal``."""

    PICK_EXPIRED = ("SELECT task_id FROM tasks WHERE state != 'pending' AND lease_until <= ? "
                    "ORDER BY lease_until LIMIT 1")
    FINISH = ("UPDATE tasks SET state = ? "
              "WHERE task_id = ? AND generation = ? AND state = 'running' AND ? < lease_until")


class NoBumpOnTakeover(_Planted):
    """Sets the generation only on the first claim: a takeover reuses it, so the fence cannot tell
    the old holder from the new. Caught by ``generation_monotonic``."""

    TAKE = ("UPDATE tasks SET state = 'running', generation = MAX(generation, 1), lease_until = ?, worker = ? "
            "WHERE task_id = ? RETURNING generation, lease_until")


class BumpsByTwo(_Planted):
    """Raises the generation by two (a trigger and the claim both bump it). Caught by
    ``generation_monotonic`` (and ``state_matches_history``): a skipped generation nobody took."""

    TAKE = ("UPDATE tasks SET state = 'running', generation = generation + 2, lease_until = ?, worker = ? "
            "WHERE task_id = ? RETURNING generation, lease_until")


class StealsLiveLeases(_Planted):
    """A "grace period" with the wrong sign: leases count as expired half a lease early, so a
    live holder's task is handed to someone else. Caught by ``lease_exclusive``."""

    def _pick(self, now: float, lease: float) -> tuple[str] | None:
        conn = self._conn
        return (conn.execute(self.PICK_EXPIRED, (now + lease / 2,)).fetchone()
                or conn.execute(self.PICK_PENDING).fetchone())


class IdempotentFinish(_Planted):
    """Answers True to a finish of an already finished task ("idempotent success"), so a stale
    holder believes its commit counted. Caught by ``single_finish``."""

    def _after_finish(self, task_id: str, accepted: bool) -> bool:
        if not accepted:
            row = self._conn.execute("SELECT state FROM tasks WHERE task_id = ?", (task_id,)).fetchone()
            accepted = row is not None and row[0] in ("done", "uncertain")
        self._conn.execute("COMMIT")
        return accepted


class FinishNotDurable(_Planted):
    """For about one task in four, finish answers True but the write is rolled back (a lost
    commit). The task stays ``running`` under its old lease: the next mid-run snapshot probe
    (``--probe-rate``) shows it there, a fraction of a second after the True
    (``state_matches_history``); once that lease runs out it is handed out again, caught there by
    ``no_reclaim_after_terminal`` (and by ``single_finish`` when the next holder finishes it too),
    and by ``state_matches_history`` in the final snapshot."""

    def _after_finish(self, task_id: str, accepted: bool) -> bool:
        if accepted and zlib.crc32(task_id.encode()) % 4 == 0:
            self._conn.execute("ROLLBACK")
            return True
        self._conn.execute("COMMIT")
        return accepted


class SnapshotOffByOne(_Planted):
    """``snapshot()`` reports the number of *earlier* attempts as the generation (off by one).
    Caught by ``state_matches_history``: at the first mid-run snapshot probe after a claim
    (``--probe-rate``), else in the final snapshot."""

    def snapshot(self) -> list[SnapshotRow]:
        return [(t, s, max(g - 1, 0), lu) for t, s, g, lu in super().snapshot()]


class DropsTasks(_Planted):
    """A partitioning filter in the pending pick skips every 13th task: it is never claimable and
    sits pending forever. Caught by ``no_lost_task``."""

    PICK_PENDING = "SELECT task_id FROM tasks WHERE state = 'pending' AND rowid % 13 != 5 LIMIT 1"


class NonAtomicClaim(_Planted):
    """The claimable task is picked outside the write transaction (the SELECT in autocommit, the
    UPDATE in its own ``BEGIN IMMEDIATE``), so two workers that claim at the same instant pick the
    same row and both take it: two live leases of one task. Caught by ``lease_exclusive``."""

    def claim(self, worker: str, now: float, lease: float) -> Claim | None:
        row = self._pick(now, lease)
        if row is None:
            return None
        with write_transaction(self._conn) as conn:
            generation, lease_until = conn.execute(self.TAKE, (now + lease, worker, row[0])).fetchone()
        return row[0], generation, lease_until


class RegisterReplaces(_Planted):
    """``register`` is an upsert (``INSERT OR REPLACE``), so registering a known task again puts it
    back to ``pending`` at generation 0: a finished task is handed out again, a running one is
    claimed again with its generation gone back (inside its holder's lease). Caught by the next
    mid-run snapshot probe (``--probe-rate``: the task is pending at generation 0, below what a claim
    returned, ``state_matches_history``), by ``no_reclaim_after_terminal``,
    ``generation_monotonic`` or ``lease_exclusive`` when it is handed out again (at the back of the
    pending tasks: often only in the drain) or, when nobody claims it again, by
    ``state_matches_history`` in the final snapshot; but only in runs that register a known task
    again (the ``duplicate_register`` fault): nothing else does."""

    REGISTER = "INSERT OR REPLACE INTO tasks (task_id, state, generation, registered) VALUES (?, 'pending', 0, ?)"


# name -> the invariants expected to catch it (any one of them suffices).
PLANTED: dict[str, tuple[str, ...]] = {
    "FinishIgnoresGeneration": ("no_stale_commit",),
    "FinishIgnoresLease": ("finish_within_lease",),
    "ReclaimsTerminal": ("no_reclaim_after_terminal",),
    "NoBumpOnTakeover": ("generation_monotonic",),
    "BumpsByTwo": ("generation_monotonic", "state_matches_history"),
    "StealsLiveLeases": ("lease_exclusive",),
    "IdempotentFinish": ("single_finish",),
    "FinishNotDurable": ("no_reclaim_after_terminal", "single_finish", "state_matches_history"),
    "SnapshotOffByOne": ("state_matches_history",),
    "DropsTasks": ("no_lost_task",),
    "NonAtomicClaim": ("lease_exclusive",),
    # Only a run that registers a known task again can show this bug: until the stress run has the
    # duplicate_register fault, the selftest reports it as missed, saying that fault was absent.
    "RegisterReplaces": ("no_reclaim_after_terminal", "generation_monotonic", "lease_exclusive",
                         "state_matches_history"),
}

# name -> the (invariant, pattern) of takeover._internal.checker.diagnosis that names its defect: what a user reads
# first when the bug is caught. The detection bench counts the caught runs whose diagnosis names that
# defect and no other (the time from a violation to the line to fix), tests/quality/test_diagnosis.py
# checks each on the shapes the bug leaves in a history.
DIAGNOSED: dict[str, tuple[str, str]] = {
    "FinishIgnoresGeneration": ("no_stale_commit", "stale_commit"),
    "FinishIgnoresLease": ("finish_within_lease", "late_finish"),
    "ReclaimsTerminal": ("no_reclaim_after_terminal", "reclaimed_after_lease"),
    "NoBumpOnTakeover": ("generation_monotonic", "no_bump"),
    "BumpsByTwo": ("generation_monotonic", "skipped"),
    "StealsLiveLeases": ("lease_exclusive", "lease_stolen"),
    "IdempotentFinish": ("single_finish", "accepted_when_finished"),
    "FinishNotDurable": ("state_matches_history", "finish_not_durable"),
    "SnapshotOffByOne": ("state_matches_history", "snapshot_behind"),
    "DropsTasks": ("no_lost_task", "passed_over"),
    "NonAtomicClaim": ("lease_exclusive", "claim_race"),
    "RegisterReplaces": ("no_reclaim_after_terminal", "reset_by_register"),
}

# name -> the model-coverage cells (takeover._internal.coverage_space) a run must reach for the bug to show: its
# defect is on that path, so a run that reached none of them cannot have seen it, whatever it found.
# Any one cell suffices. ``takeover selftest`` names each run on the bug that reached none, and fails
# when none of its runs did (or the one that caught it did not); every run's console says which planted
# bugs' cells it never reached. A mutant declares its own
# the same way: the check (coverage_space.unreached_needs) takes any name -> cells table.
_FINISH = "finish_done|finish_uncertain"
NEEDS_CELLS: dict[str, tuple[str, ...]] = {
    # a stale holder's finish while the new holder's lease is live
    "FinishIgnoresGeneration": (*expand(f"{_FINISH}/running/stale/inside|edge"),),
    # a finish by the holder after its lease ran out, nobody having taken the task over
    "FinishIgnoresLease": (*expand(f"{_FINISH}/running/expired/edge|past"),),
    # a claim asked while the caller's last task had ended (done or uncertain)
    "ReclaimsTerminal": (*expand("claim/done|uncertain/*/none"),),
    # a takeover: a claim of a running task whose lease is at or past its end
    "NoBumpOnTakeover": (*expand("claim/running/stale|expired|never/edge|past"),),
    # any first claim
    "BumpsByTwo": (*expand("claim/pending/never/none"),),
    # the steal lives in the takeover's pick: a takeover, or the steal itself (a live lease handed out)
    "StealsLiveLeases": (*expand("claim/running/stale|expired|never/*"),),
    # a finish of a task that had already ended
    "IdempotentFinish": (*expand(f"{_FINISH}/done|uncertain/*/none"),),
    # an accepted finish: a holder inside its lease
    "FinishNotDurable": (*expand(f"{_FINISH}/running/holder/inside|edge"),),
    # a snapshot listing a task that was claimed (generation 1 and up)
    "SnapshotOffByOne": (*expand("snapshot/running|done|uncertain/*/*"),),
    # pending tasks claimed (the filter passes over some of them)
    "DropsTasks": (*expand("claim/pending/never/none"),),
    # claims of pending tasks (two at once show the race)
    "NonAtomicClaim": (*expand("claim/pending/never/none"),),
    # a known task registered again
    "RegisterReplaces": (*expand("register/pending|running|done|uncertain/never/*"),),
}

# Planted bugs that only one fault kind can expose, and that kind (as config.json ``faults`` names
# it): a run without it cannot catch them, and the selftest says so rather than only "missed".
NEEDS_FAULT: dict[str, str] = {"RegisterReplaces": "duplicate_register"}
