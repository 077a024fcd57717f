"""The planted bugs of takeover.queues.planted, on PostgreSQL: ``takeover selftest --db postgres``.

Each queue below is the PostgreSQL reference queue (takeover.queues.postgres_lease) with the same one
mistake as its SQLite namesake, written as PostgreSQL code would make it, and it is expected to be
caught by the same invariants (:data:`PLANTED` is the SQLite table's, for these names). What a bug
is, and why a real queue ships it, is told once, on the SQLite class; here only how it is planted.

Use one as ``--queue takeover.queues.planted_postgres:NAME --db postgres``.
"""

from __future__ import annotations

import zlib
from typing import Any

from takeover.contract import Claim, SnapshotRow
from takeover.queues import planted
from takeover.queues.postgres_lease import PICK_EXPIRED, PICK_PENDING, PostgresLeaseQueue, claim_statement


class FinishIgnoresGeneration(PostgresLeaseQueue):
    """Finish by task id alone."""

    FINISH = ("UPDATE tasks SET state = %(outcome)s, lease_until = NULL WHERE task_id = %(task_id)s "
              "AND state = 'running' AND %(now)s < lease_until")


class FinishIgnoresLease(PostgresLeaseQueue):
    """Finish checks the generation, never the lease."""

    FINISH = ("UPDATE tasks SET state = %(outcome)s, lease_until = NULL WHERE task_id = %(task_id)s "
              "AND generation = %(generation)s AND state = 'running'")


class ReclaimsTerminal(PostgresLeaseQueue):
    """The expired pick forgets ``state = 'running'``, and finish keeps the lease."""

    CLAIM = claim_statement(expired=PICK_EXPIRED.replace("state = 'running'", "state <> 'pending'"))
    FINISH = ("UPDATE tasks SET state = %(outcome)s WHERE task_id = %(task_id)s AND generation = %(generation)s "
              "AND state = 'running' AND %(now)s < lease_until")


class NoBumpOnTakeover(PostgresLeaseQueue):
    """The generation is set on the first claim only."""

    CLAIM = claim_statement(bump="GREATEST(generation, 1)")


class BumpsByTwo(PostgresLeaseQueue):
    """Every claim raises the generation by two."""

    CLAIM = claim_statement(bump="generation + 2")


class StealsLiveLeases(PostgresLeaseQueue):
    """Leases count as expired half a lease early (the expired pick alone sees the shifted ``now``)."""

    def _claim_params(self, worker: str, now: float, lease: float) -> dict[str, Any]:
        return {**super()._claim_params(worker, now, lease), "now": now + lease / 2}


class IdempotentFinish(PostgresLeaseQueue):
    """A refused finish of a finished task answers True."""

    def _finish(self, params: dict[str, Any]) -> bool:
        if super()._finish(params):
            return True
        row = self._one("SELECT state FROM tasks WHERE task_id = %(task_id)s", params)
        return row is not None and row[0] in ("done", "uncertain")


class FinishNotDurable(PostgresLeaseQueue):
    """For about one task in four (the same tasks as on SQLite), an accepted finish is rolled back and
    answered True."""

    def _finish(self, params: dict[str, Any]) -> bool:
        conn = self._connection()
        with conn.transaction(force_rollback=zlib.crc32(params["task_id"].encode()) % 4 == 0):
            return int(conn.execute(self.FINISH, params).rowcount) == 1


class SnapshotOffByOne(PostgresLeaseQueue):
    """The snapshot's generation is one too low."""

    def snapshot(self) -> list[SnapshotRow]:
        return [(t, s, max(g - 1, 0), lu) for t, s, g, lu in super().snapshot()]


class DropsTasks(PostgresLeaseQueue):
    """The pending pick skips every 13th task it registered."""

    CLAIM = claim_statement(pending=PICK_PENDING.replace("state = 'pending'", "state = 'pending' AND seq % 13 <> 5"))


class NonAtomicClaim(PostgresLeaseQueue):
    """The claimable task is read in one statement, without a row lock, and taken in a second one that
    no longer checks it is claimable: two workers that claim at once both take it."""

    PEEK = ("SELECT task_id FROM tasks WHERE state = 'pending' OR (state = 'running' AND lease_until <= %(now)s) "
            "ORDER BY state = 'pending', lease_until, seq LIMIT 1")
    TAKE = ("UPDATE tasks SET state = 'running', generation = generation + 1, lease_until = %(until)s, "
            "worker = %(worker)s WHERE task_id = %(task_id)s RETURNING task_id, generation, lease_until")

    def claim(self, worker: str, now: float, lease: float) -> Claim | None:
        params = self._claim_params(worker, now, lease)
        row = self._one(self.PEEK, params)
        taken = None if row is None else self._one(self.TAKE, {**params, "task_id": row[0]})
        return None if taken is None else (taken[0], int(taken[1]), float(taken[2]))


class RegisterReplaces(PostgresLeaseQueue):
    """Register is an upsert that puts a known task back to pending at generation 0."""

    _UPSERT = ("ON CONFLICT (task_id) DO UPDATE SET state = 'pending', generation = 0, lease_until = NULL, "
               "worker = NULL")
    REGISTER = PostgresLeaseQueue.REGISTER.replace("ON CONFLICT (task_id) DO NOTHING", _UPSERT)
    REGISTER_MANY = PostgresLeaseQueue.REGISTER_MANY.replace("ON CONFLICT (task_id) DO NOTHING", _UPSERT)


_HERE = (FinishIgnoresGeneration, FinishIgnoresLease, ReclaimsTerminal, NoBumpOnTakeover, BumpsByTwo, StealsLiveLeases,
         IdempotentFinish, FinishNotDurable, SnapshotOffByOne, DropsTasks, NonAtomicClaim, RegisterReplaces)
# name -> the invariants expected to catch it: the SQLite namesake's, in the SQLite table's order.
PLANTED: dict[str, tuple[str, ...]] = {name: planted.PLANTED[name] for name in planted.PLANTED
                                       if name in {cls.__name__ for cls in _HERE}}

# name -> the model-coverage cells each bug needs: the SQLite namesake's (the same defect, the same path).
NEEDS_CELLS: dict[str, tuple[str, ...]] = {name: planted.NEEDS_CELLS[name] for name in PLANTED}


def planted_queues(database: str) -> tuple[str, dict[str, tuple[str, ...]]]:
    """The module of the planted queues for a ``--db`` value, and its table of expected invariants."""
    from takeover._internal import db

    if db.kind(database) == db.POSTGRES:
        return __name__, PLANTED
    if db.kind(database) == db.REDIS:
        from takeover.queues import planted_redis

        return planted_redis.__name__, planted_redis.PLANTED
    return planted.__name__, planted.PLANTED
