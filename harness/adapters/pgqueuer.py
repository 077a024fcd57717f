"""pgqueuer 1.6.0 (PyPI, MIT, PostgreSQL) behind the queue contract.

Name: ``takeover.adapters.pgqueuer:PgQueuerAdapter``. Install: ``pip install 'takeover[pgqueuer]'``.
Runs on PostgreSQL only (``--db postgres`` or a URL).

What pgqueuer 1.6.0 offers, read from its source (line numbers in docs/adapters.md):

* ``Queries.enqueue`` inserts ``queued`` rows into the ``pgqueuer`` table and a ``queued`` row into
  ``pgqueuer_log``.
* ``Queries.dequeue(batch_size, entrypoints, queue_manager_id, heartbeat_timeout)`` is one
  statement: it locks (``FOR UPDATE SKIP LOCKED``) the next ``queued`` rows *and* the ``picked``
  rows whose ``heartbeat < NOW() - heartbeat_timeout``, sets them ``picked`` with ``heartbeat =
  NOW()`` and the caller's ``queue_manager_id``, and logs a ``picked`` row per job. Recovery of a
  stalled job is built into the claim: nothing else is needed.
* While a job runs, ``QueueManager`` sends ``update_heartbeat([job_id])`` every
  ``heartbeat_timeout / 2`` (through a buffer flushed every ``heartbeat_timeout / 8``).
  ``UPDATE ... SET heartbeat = NOW() WHERE id = ANY(ids)``: by job id only; it tells its caller
  nothing, so a worker whose job was re-picked by another keeps beating for it.
* Completion is ``log_jobs([(job, status, traceback)])``: ``DELETE FROM pgqueuer WHERE id = ANY(ids)``
  (or, for ``failed``, an ``UPDATE`` by id), plus a log row. By job id only: no status, no
  ``queue_manager_id``, no time is checked, and it returns nothing. ``QueueManager`` does not call it
  directly: it adds the completion to a ``JobStatusLogBuffer`` that flushes every 0.1 s or every
  ``batch_size`` (10) completions, so a killed worker loses the completions still in the buffer.

How the contract maps onto it, and what is *not* added:

* task id = the job's payload (the task name as bytes); the adapter keeps ``task -> job id`` in its
  own table ``takeover_tasks``, because pgqueuer deletes a finished job's row (its log rows keep
  the id). Registering checks that table first, in the same transaction as the enqueue.
* states: ``queued`` -> pending, ``picked`` -> running, ``failed`` -> uncertain; a deleted row's
  last log status: ``successful`` -> done, ``exception`` (and ``canceled`` / ``deleted``) ->
  uncertain.
* generation: the number of ``picked`` log rows of the job, which pgqueuer writes in the dequeue
  statement itself. An observation, not a token: ``log_jobs`` takes a job id only.
* the contract's ``lease`` is ``heartbeat_timeout``; ``lease_until`` = the job's heartbeat + lease
  (from then on the next dequeue may re-pick it). ``extend`` is pgqueuer's heartbeat
  (``update_heartbeat([job_id])``) and returns ``now + lease``, since pgqueuer's heartbeat cannot
  fail; the harness's ``--heartbeat`` plays the ``Heartbeat`` task (pgqueuer's own period is
  lease / 2).
* each contract worker name is one ``queue_manager_id`` (a uuid4 per process, as each
  ``QueueManager`` has), and each claim dequeues one job (``batch_size = 1``).
* ``finish`` calls ``log_jobs`` at once and returns True: pgqueuer's completion has no way to
  refuse, and reports nothing. ``done`` -> ``successful``, ``uncertain`` -> ``exception`` (what a
  job that raised records under the default ``on_failure="delete"``). Calling ``log_jobs`` at once
  is what the buffer does 0.1 s later: the adapter does not keep completions in memory, so the
  completions a kill would lose from the buffer are not lost here (docs/adapters.md).

The clock: SQL ``NOW()`` is the harness's ``now`` (see pgcommon), set before each library call on
the adapter's one library connection.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from takeover.adapters import pgcommon as pg
from takeover.contract import OUTCOMES, Claim, SnapshotRow

PINNED = "1.6.0"
pg.require_library("pgqueuer", PINNED)

import psycopg  # noqa: E402 - after the check, so a missing library is one line
from pgqueuer.domain.types import JobId, QueueEntrypoint, QueueManagerId  # noqa: E402
from pgqueuer.models import Job  # noqa: E402
from pgqueuer.queries import EntrypointExecutionParameter, Queries  # noqa: E402

NAME = "takeover.adapters.pgqueuer:PgQueuerAdapter"
ENTRYPOINT = QueueEntrypoint("takeover")
QUEUE_STATES = {"queued": "pending", "picked": "running", "failed": "uncertain"}
LOG_STATES = {"successful": "done", "exception": "uncertain", "canceled": "uncertain", "deleted": "uncertain"}
OUTCOME_STATUS = {"done": "successful", "uncertain": "exception"}

ADAPTER_SCHEMA = """
CREATE TABLE IF NOT EXISTS takeover_tasks (task_id text PRIMARY KEY, job_id bigint NOT NULL UNIQUE);
CREATE INDEX IF NOT EXISTS takeover_log_by_job ON pgqueuer_log (job_id);
"""

GENERATION = "(SELECT count(*) FROM pgqueuer_log l WHERE l.job_id = t.job_id AND l.status = 'picked')"


class PgQueuerAdapter:
    """``takeover.adapters.pgqueuer:PgQueuerAdapter`` — pgqueuer as it is, behind the contract."""

    # What each contract call is in pgqueuer's API, for `takeover replay --issue` (takeover._internal.replay.issue).
    library = "pgqueuer"
    library_calls = {
        "register": "`Queries.enqueue(entrypoint, payload, priority)`",
        "claim": "`Queries.dequeue(batch_size=1, heartbeat_timeout={lease} s)`",
        "extend": "`Queries.update_heartbeat([job_id])`",
        "finish:done": "`Queries.log_jobs([(job, 'successful', None)])`",
        "finish:uncertain": "`Queries.log_jobs([(job, 'exception', None)])`",
    }
    library_states = {"pending": "queued", "running": "picked", "done": "logged successful",
                      "uncertain": "logged exception"}

    databases = ("postgres",)  # the run's database must be a postgresql:// URL

    def __init__(self, db: str) -> None:
        self.url = pg.require_url(db, NAME)
        self._loop = pg.EventLoop()
        self._aconn = self._loop.run(
            psycopg.AsyncConnection.connect(self.url, autocommit=True, options=pg.CONNECT_OPTIONS)
        )
        self._q = Queries.from_psycopg_connection(self._aconn)
        with pg.setup_lock(self.url, "pgqueuer") as (conn, installed):
            if not installed:
                self._loop.run(self._q.install())
                conn.execute(ADAPTER_SCHEMA)
                pg.mark_installed(conn, "pgqueuer")
        self._conn = pg.connect(self.url)
        self._lease = pg.StoredLease(self._conn)
        self._managers: dict[str, QueueManagerId] = {}  # contract worker name -> queue_manager_id
        self._held: dict[tuple[str, int], Job] = {}  # (task, generation) -> the job as dequeue returned it

    async def _at(self, now: float) -> None:
        await self._aconn.execute(pg.SET_CLOCK, {"now": pg.clock_value(now)})

    # -- the contract ------------------------------------------------------------------------

    def register(self, task_id: str, now: float) -> None:
        self.register_many([task_id], now)

    def register_many(self, task_ids: list[str], now: float) -> None:
        self._loop.run(self._register(list(dict.fromkeys(task_ids)), now))

    async def _register(self, task_ids: list[str], now: float) -> None:
        """A producer that checks before it enqueues: the check, the enqueue and the adapter's
        record of it are one transaction, under a lock so two producers cannot both miss."""
        async with self._aconn.transaction():
            await self._aconn.execute("SELECT pg_advisory_xact_lock(hashtext('takeover.register'))")
            cur = await self._aconn.execute("SELECT task_id FROM takeover_tasks WHERE task_id = ANY(%s)", (task_ids,))
            known = {row[0] for row in await cur.fetchall()}
            new = [t for t in task_ids if t not in known]
            if not new:
                return
            await self._at(now)
            ids = await self._q.enqueue([ENTRYPOINT] * len(new), [t.encode() for t in new], [0] * len(new))
            async with self._aconn.cursor() as cur:
                await cur.executemany(
                    "INSERT INTO takeover_tasks (task_id, job_id) VALUES (%s, %s)", list(zip(new, ids, strict=True))
                )

    def claim(self, worker: str, now: float, lease: float) -> Claim | None:
        self._lease.remember(lease)
        manager = self._managers.setdefault(worker, QueueManagerId(uuid.uuid4()))
        jobs = self._loop.run(self._dequeue(manager, now, lease))
        if not jobs:
            return None
        job = jobs[0]
        row = self._conn.execute(
            f"SELECT t.task_id, {GENERATION} FROM takeover_tasks t WHERE t.job_id = %s", (job.id,)
        ).fetchone()
        if row is None:  # every job is registered through the adapter: missing means the table is gone
            raise RuntimeError(f"pgqueuer job {job.id} has no task in takeover_tasks")
        task, generation = str(row[0]), int(row[1])
        self._held[(task, generation)] = job
        return task, generation, job.heartbeat.timestamp() + lease

    async def _dequeue(self, manager: QueueManagerId, now: float, lease: float) -> list[Job]:
        await self._at(now)
        return await self._q.dequeue(
            batch_size=1,
            entrypoints={ENTRYPOINT: EntrypointExecutionParameter(concurrency_limit=0)},
            queue_manager_id=manager,
            global_concurrency_limit=None,
            heartbeat_timeout=timedelta(seconds=lease),
        )

    def extend(self, task_id: str, generation: int, now: float, lease: float) -> float | None:
        """pgqueuer's heartbeat: by job id, answering nothing."""
        job_id = self._job_id(task_id, generation)
        if job_id is None:
            return None
        self._loop.run(self._beat(job_id, now))
        return now + lease

    async def _beat(self, job_id: int, now: float) -> None:
        await self._at(now)
        await self._q.update_heartbeat([JobId(job_id)])

    def finish(self, task_id: str, generation: int, outcome: str, now: float) -> bool:
        """``generation`` is not passed on: ``log_jobs`` completes by job id and cannot refuse."""
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, got {outcome!r}")
        job = self._held.pop((task_id, generation), None)
        if job is None:
            job = self._job(task_id)
            if job is None:
                return False
        self._loop.run(self._log(job, OUTCOME_STATUS[outcome], now))
        return True

    async def _log(self, job: Job, status: Any, now: float) -> None:
        await self._at(now)
        await self._q.log_jobs([(job, status, None)])

    def snapshot(self) -> list[SnapshotRow]:
        lease = self._lease.get()
        rows = self._conn.execute(
            f"SELECT t.task_id, q.status::text, q.heartbeat, {GENERATION}, "
            "(SELECT l.status::text FROM pgqueuer_log l WHERE l.job_id = t.job_id ORDER BY l.id DESC LIMIT 1) "
            "FROM takeover_tasks t LEFT JOIN pgqueuer q ON q.id = t.job_id ORDER BY t.job_id"
        ).fetchall()
        return [
            pg.snapshot_row(task, _state(status, last_logged), generation, heartbeat, lease)
            for task, status, heartbeat, generation, last_logged in rows
        ]

    def close(self) -> None:
        pg.shut(self._loop, self._aconn.close(), self._conn)

    # -- helpers -----------------------------------------------------------------------------

    def _job_id(self, task_id: str, generation: int) -> int | None:
        job = self._held.get((task_id, generation))
        if job is not None:
            return int(job.id)
        row = self._conn.execute("SELECT job_id FROM takeover_tasks WHERE task_id = %s", (task_id,)).fetchone()
        return None if row is None else int(row[0])

    def _job(self, task_id: str) -> Job | None:
        """The job row as dequeue would have returned it, for a finish from a process that did not
        claim (a scenario's reopened worker): ``log_jobs`` reads only its id."""
        row = self._conn.execute(
            "SELECT q.* FROM takeover_tasks t JOIN pgqueuer q ON q.id = t.job_id WHERE t.task_id = %s", (task_id,)
        )
        names = [d.name for d in row.description or []]
        found = row.fetchone()
        return None if found is None else Job.model_validate(dict(zip(names, found, strict=True)))


def _state(status: str | None, last_logged: str | None) -> str:
    """A job still in the queue table has its status there; a completed one only its log rows."""
    if status is not None:
        return QUEUE_STATES.get(status, f"unknown({status})")
    return LOG_STATES.get(str(last_logged), f"unknown({last_logged})")
