"""chancy 0.26.0 (PyPI, MIT, PostgreSQL) behind the queue contract.

Name: ``takeover.adapters.chancy:ChancyAdapter``. Install: ``pip install 'takeover[chancy]'``.
Runs on PostgreSQL only (``--db postgres`` or a URL).

What chancy 0.26.0 offers, read from its source (line numbers in docs/adapters.md):

* ``Chancy.push_many_ex(cursor, jobs)`` inserts ``pending`` jobs in the caller's transaction.
* ``Worker.fetch_jobs(queue, conn, up_to)`` is one ``UPDATE`` over a ``SELECT ... FOR UPDATE SKIP
  LOCKED`` of ``pending`` / ``retrying`` jobs with ``attempts < max_attempts``: ``state =
  'running'``, ``taken_by = worker_id`` and a fresh random ``claim_id``. No lease length and no
  expiry is stored with the job.
* Completion: the executor builds the finished job (``succeeded``, or ``failed`` / ``retrying`` for
  a job that raised, ``attempts + 1``) and hands it to ``Worker.queue_update``, which keeps it in
  memory; ``Worker.flush`` (every ``send_outgoing_interval`` = 1 s) writes the batch with ``UPDATE
  ... WHERE id = %(id)s AND claim_id IS NOT DISTINCT FROM %(claim_id)s``. The claim id fences
  completion: an update from a claim that was recovered or replaced is discarded. Nothing checks
  the time.
* Liveness is per worker: ``announce_worker`` sets the worker's ``last_seen`` (every 30 s by
  default). The ``Recovery`` plugin (every 60 s, on the leader) puts every ``running`` job whose
  worker's ``last_seen`` is older than ``heartbeat_timeout`` (90 s) back to ``pending``, clears its
  claim id and raises its ``max_attempts`` by one.

How the contract maps onto it, and what is *not* added:

* task id = the job's ``kwargs['task']``; one job per task (registered once, under a
  transaction-scoped advisory lock, with ``push_many_ex`` in the same transaction).
* states: ``pending`` and ``retrying`` -> pending (both are claimable), ``running`` -> running,
  ``succeeded`` -> done, ``failed`` -> uncertain.
* generation: chancy has no claim counter, only the random ``claim_id``. A trigger owned by the
  adapter counts the changes of ``claim_id`` to a new value (inside ``fetch_jobs``' own
  statement) and records ``claim_id -> generation``: an observation. The fence is chancy's own:
  ``finish`` hands chancy the claimed job with the claim id ``fetch_jobs`` returned for that
  generation, never the generation.
* each contract worker name is one chancy ``Worker`` of this process (``heartbeat_timeout`` =
  the contract's ``lease``), announced at each of its claims and at each ``extend`` (the harness's
  ``--heartbeat`` plays ``_maintain_heartbeat``). ``extend`` returns ``now + lease``: the
  announcement is by worker and tells its caller nothing about the job.
* the recovery sweep (``Recovery.recover``) runs at the start of every claim, where the leader's
  periodic pass would run, then one job is fetched. ``lease_until`` = the worker's ``last_seen`` +
  lease (from then on the sweep may take the job back).
* ``finish`` does what the executor does on completion (``on_job_completed``: ``done`` ->
  succeeded, ``uncertain`` -> the job raised), then ``queue_update`` and ``flush`` at once. It
  returns whether the flush accepted the update, which chancy reports to its plugins
  (``on_job_updated`` is called for accepted updates only): the adapter registers a plugin that
  records them. Flushing at once is what the periodic writer does up to 1 s later: the adapter
  does not keep completions in memory, so the completions a kill would lose from that queue are
  not lost here (docs/adapters.md).

The clock: SQL ``NOW()`` is the harness's ``now`` (see pgcommon); the Python-side times chancy
takes from ``datetime.now`` (a job's ``scheduled_at`` at push, ``completed_at`` on completion) are
given the harness's ``now`` too.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from typing import Any

from takeover.adapters import pgcommon as pg
from takeover.contract import OUTCOMES, Claim, SnapshotRow

PINNED = "0.26.0"
pg.require_library("chancy", PINNED)

import psycopg  # noqa: E402 - after the check, so a missing library is one line
from chancy import Chancy, Job, Queue, QueuedJob  # noqa: E402
from chancy.plugin import Plugin  # noqa: E402
from chancy.plugins.recovery import Recovery  # noqa: E402
from chancy.worker import Worker  # noqa: E402
from psycopg.rows import dict_row  # noqa: E402

NAME = "takeover.adapters.chancy:ChancyAdapter"
QUEUE = Queue(name="takeover")
FUNC = "takeover.task"
STATE_NAMES = {
    "pending": "pending",
    "retrying": "pending",
    "running": "running",
    "succeeded": "done",
    "failed": "uncertain",
}

ADAPTER_SCHEMA = """
CREATE INDEX IF NOT EXISTS takeover_by_task ON chancy_jobs ((kwargs->>'task'));
CREATE TABLE IF NOT EXISTS takeover_claims (
    job_id uuid NOT NULL,
    generation integer NOT NULL,
    claim_id uuid NOT NULL,
    PRIMARY KEY (job_id, generation)
);
CREATE OR REPLACE FUNCTION takeover_count_claims() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO takeover_claims (job_id, generation, claim_id)
    VALUES (NEW.id, 1 + (SELECT count(*) FROM takeover_claims WHERE job_id = NEW.id), NEW.claim_id);
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS takeover_count_claims ON chancy_jobs;
CREATE TRIGGER takeover_count_claims AFTER UPDATE OF claim_id ON chancy_jobs FOR EACH ROW
    WHEN (NEW.claim_id IS NOT NULL AND NEW.claim_id IS DISTINCT FROM OLD.claim_id)
    EXECUTE FUNCTION takeover_count_claims();
"""

GENERATION = "(SELECT count(*) FROM takeover_claims c WHERE c.job_id = j.id)"


class _AcceptedUpdates(Plugin):
    """Records which job updates a flush accepted: chancy calls ``on_job_updated`` after the commit
    for those only (worker.py, ``flush``). It changes nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.accepted: set[tuple[uuid.UUID, uuid.UUID | None]] = set()

    @staticmethod
    def get_identifier() -> str:
        return "takeover.accepted_updates"

    async def on_job_updated(self, *, job: QueuedJob, worker: Worker) -> None:
        self.accepted.add((job.id, job.claim_id))


def _logger() -> logging.Logger:
    """chancy logs each push and flush at INFO to stderr; a worker of a stress run would print
    thousands of lines. Warnings and errors still go through."""
    log = logging.getLogger("takeover.adapters.chancy")
    log.setLevel(logging.WARNING)
    return log


class ChancyAdapter:
    """``takeover.adapters.chancy:ChancyAdapter`` — chancy as it is, behind the contract."""

    # What each contract call is in chancy's API, for `takeover replay --issue` (takeover._internal.replay.issue).
    library = "chancy"
    library_calls = {
        "register": "`Chancy.push_many_ex(cursor, [job])`",
        "claim": "`Recovery.recover(worker, chancy, cursor)` (heartbeat_timeout {lease} s), then "
                 "`Worker.fetch_jobs(queue, conn, up_to=1)`",
        "extend": "`Worker.announce_worker(conn)`",
        "finish:done": "`Worker.queue_update(job succeeded)`, then `Worker.flush()`",
        "finish:uncertain": "`Worker.queue_update(job failed)`, then `Worker.flush()`",
    }
    library_states = {"pending": "pending", "running": "running", "done": "succeeded", "uncertain": "failed"}

    databases = ("postgres",)  # the run's database must be a postgresql:// URL

    def __init__(self, db: str) -> None:
        self.url = pg.require_url(db, NAME)
        self._loop = pg.EventLoop()
        self._accepted = _AcceptedUpdates()
        # One pooled connection, so the clock set before a call is the one the call sees.
        dsn = psycopg.conninfo.make_conninfo(self.url, options=pg.CONNECT_OPTIONS)
        self._chancy = Chancy(dsn, plugins=[self._accepted], min_connection_pool_size=1,
                              max_connection_pool_size=1, log=_logger())  # fmt: skip
        self._loop.run(self._chancy.pool.open(wait=True))
        with pg.setup_lock(self.url, "chancy") as (conn, installed):
            if not installed:
                self._loop.run(self._chancy.migrate())
                conn.execute(ADAPTER_SCHEMA)
                pg.mark_installed(conn, "chancy")
        self._conn = pg.connect(self.url)
        self._lease = pg.StoredLease(self._conn)
        self._workers: dict[str, Worker] = {}
        self._held: dict[tuple[str, int], tuple[QueuedJob, Worker]] = {}

    def _run(self, query: Any, params: Any = None, *, now: float | None = None) -> list[dict[str, Any]]:
        """One statement of chancy's on its pool, at the harness's ``now``."""
        return self._loop.run(self._execute(query, params, now))

    async def _execute(self, query: Any, params: Any, now: float | None) -> list[dict[str, Any]]:
        async with self._chancy.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            if now is not None:
                await cur.execute(pg.SET_CLOCK, {"now": pg.clock_value(now)})
            await cur.execute(query, params)
            return await cur.fetchall() if cur.description else []

    async def _at(self, now: float) -> None:
        async with self._chancy.pool.connection() as conn:
            await conn.execute(pg.SET_CLOCK, {"now": pg.clock_value(now)})

    # -- the contract ------------------------------------------------------------------------

    def register(self, task_id: str, now: float) -> None:
        self.register_many([task_id], now)

    def register_many(self, task_ids: list[str], now: float) -> None:
        self._loop.run(self._register(list(dict.fromkeys(task_ids)), now))

    async def _register(self, task_ids: list[str], now: float) -> None:
        """A producer that checks before it pushes, in one transaction with the push."""
        async with (
            self._chancy.pool.connection() as conn,
            conn.cursor(row_factory=dict_row) as cur,
            conn.transaction(),
        ):
            await cur.execute(pg.SET_CLOCK, {"now": pg.clock_value(now)})
            await cur.execute("SELECT pg_advisory_xact_lock(hashtext('takeover.register'))")
            await cur.execute("SELECT kwargs->>'task' AS task FROM chancy_jobs WHERE kwargs->>'task' = ANY(%s)",
                              (task_ids,))  # fmt: skip
            known = {row["task"] for row in await cur.fetchall()}
            new = [t for t in task_ids if t not in known]
            if new:
                at = pg.utc_datetime(now)
                jobs = [Job(func=FUNC, queue=QUEUE.name, kwargs={"task": t}, scheduled_at=at) for t in new]
                await self._chancy.push_many_ex(cur, jobs)

    def claim(self, worker: str, now: float, lease: float) -> Claim | None:
        self._lease.remember(lease)
        chancy_worker = self._worker(worker, now, lease)
        jobs = self._loop.run(self._recover_and_fetch(chancy_worker, now))
        if not jobs:
            return None
        job = jobs[0]
        row = self._conn.execute(
            "SELECT generation FROM takeover_claims WHERE job_id = %s AND claim_id = %s", (job.id, job.claim_id)
        ).fetchone()
        if row is None:  # the trigger runs in fetch_jobs' statement; missing means the schema is gone
            raise RuntimeError(f"no claim record for chancy job {job.id}")
        task, generation = str((job.kwargs or {})["task"]), int(row[0])
        self._held[(task, generation)] = (job, chancy_worker)
        return task, generation, now + lease

    async def _recover_and_fetch(self, worker: Worker, now: float) -> list[QueuedJob]:
        async with self._chancy.pool.connection() as conn:
            await conn.execute(pg.SET_CLOCK, {"now": pg.clock_value(now)})
            async with conn.cursor(row_factory=dict_row) as cur:
                await Recovery.recover(worker, self._chancy, cur)
            await conn.commit()
            return await worker.fetch_jobs(QUEUE, conn, up_to=1)

    def extend(self, task_id: str, generation: int, now: float, lease: float) -> float | None:
        """chancy's heartbeat: the worker announces itself; nothing is said about the job."""
        held = self._held.get((task_id, generation))
        if held is None:
            return None  # this process never held that generation: it has no worker to announce
        self._loop.run(self._announce(held[1], now))
        return now + lease

    async def _announce(self, worker: Worker, now: float) -> None:
        async with self._chancy.pool.connection() as conn:
            await conn.execute(pg.SET_CLOCK, {"now": pg.clock_value(now)})
            await worker.announce_worker(conn)

    def finish(self, task_id: str, generation: int, outcome: str, now: float) -> bool:
        """The executor's completion, then chancy's fenced flush; True when chancy accepted it."""
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, got {outcome!r}")
        held = self._held.pop((task_id, generation), None)
        if held is None:
            held = self._claimed_elsewhere(task_id, generation)
            if held is None:
                return False
        job, worker = held
        finished = self._completed(job, outcome, now)
        self._accepted.accepted.discard((job.id, job.claim_id))
        self._loop.run(self._flush(worker, finished, now))
        return (job.id, job.claim_id) in self._accepted.accepted

    async def _flush(self, worker: Worker, finished: QueuedJob, now: float) -> None:
        await self._at(now)
        await worker.queue_update(finished)
        await worker.flush()

    def snapshot(self) -> list[SnapshotRow]:
        lease = self._lease.get()
        rows = self._conn.execute(
            f"SELECT j.kwargs->>'task', j.state, {GENERATION}, w.last_seen "
            "FROM chancy_jobs j LEFT JOIN chancy_workers w ON w.worker_id = j.taken_by "
            "WHERE j.queue = %s ORDER BY j.created_at, j.id",
            (QUEUE.name,),
        ).fetchall()
        return [
            pg.snapshot_row(task, STATE_NAMES.get(status, f"unknown({status})"), generation, last_seen, lease)
            for task, status, generation, last_seen in rows
        ]

    def close(self) -> None:
        pg.shut(self._loop, self._chancy.pool.close(), self._conn)

    # -- helpers -----------------------------------------------------------------------------

    def _worker(self, name: str, now: float, lease: float) -> Worker:
        """The chancy worker behind a contract worker name; each claim is an announcement."""
        worker = self._workers.get(name)
        if worker is None:
            worker = Worker(self._chancy, worker_id=f"{name}-{uuid.uuid4()}", heartbeat_timeout=lease,
                            register_signal_handlers=False)  # fmt: skip
            self._workers[name] = worker
        worker.heartbeat_timeout = lease  # chancy reads it as seconds (an int in its signature)
        self._loop.run(self._announce(worker, now))
        return worker

    def _completed(self, job: QueuedJob, outcome: str, now: float) -> QueuedJob:
        """``Executor.on_job_completed`` (executors/base.py), with the harness's ``now`` for its
        ``datetime.now``; ``uncertain`` is a job that raised."""
        if outcome == "done":
            return dataclasses.replace(job, state=QueuedJob.State.SUCCEEDED, completed_at=pg.utc_datetime(now),
                                       attempts=job.attempts + 1)  # fmt: skip
        failed = job.attempts + 1 >= job.max_attempts
        return dataclasses.replace(
            job,
            state=QueuedJob.State.FAILED if failed else QueuedJob.State.RETRYING,
            attempts=job.attempts + 1,
            completed_at=pg.utc_datetime(now) if failed else None,
            errors=[*job.errors, {"traceback": "takeover: the outcome is uncertain", "attempt": job.attempts}],
        )

    def _claimed_elsewhere(self, task_id: str, generation: int) -> tuple[QueuedJob, Worker] | None:
        """A finish from a process that did not claim (a scenario's reopened worker): the job as
        ``fetch_jobs`` returned it for that generation, from the row and the recorded claim id."""
        rows = self._run(
            "SELECT j.*, c.claim_id AS generation_claim FROM chancy_jobs j "
            "JOIN takeover_claims c ON c.job_id = j.id AND c.generation = %s WHERE j.kwargs->>'task' = %s",
            (generation, task_id),
        )
        if not rows:
            return None
        record = dict(rows[0])
        record["claim_id"] = record.pop("generation_claim")
        worker = Worker(self._chancy, worker_id=record.get("taken_by") or f"takeover-{uuid.uuid4()}",
                        register_signal_handlers=False)  # fmt: skip
        return QueuedJob.unpack(record), worker
