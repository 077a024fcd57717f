"""procrastinate 3.10.0 (PyPI, MIT, PostgreSQL) behind the queue contract.

Name: ``takeover.adapters.procrastinate:ProcrastinateAdapter``. Install:
``pip install 'takeover[procrastinate]'``. Runs on PostgreSQL only (``--db postgres`` or a URL).

What procrastinate 3.10.0 offers, read from its source (line numbers in docs/adapters.md):

* ``JobManager.batch_defer_jobs_async`` inserts ``todo`` jobs (``procrastinate_defer_jobs_v1``).
* ``JobManager.fetch_job(queues, worker_id)`` runs ``procrastinate_fetch_job_v2``: one ``UPDATE``
  over a ``SELECT ... FOR UPDATE SKIP LOCKED`` that sets ``status = 'doing'`` and
  ``worker_id``. A trigger records a ``started`` event for the job in the same statement. There is
  no lease: nothing about the job says until when it is held.
* Liveness is per worker, not per job: a worker registers (``register_worker``), sends
  ``update_heartbeat(worker_id)`` every 10 s from a background coroutine, and prunes workers
  silent for 30 s when it starts (``prune_stalled_workers``).
* Nothing in the library takes a stalled job back. The documented recipe is a periodic task of the
  user's: ``for job in get_stalled_jobs(): retry_job(job)``, where a job is stalled when its
  worker's heartbeat is older than ``seconds_since_heartbeat`` (or its worker row is gone), and
  ``retry_job`` sets it back to ``todo``.
* ``finish_job_by_id_async(job_id, status, delete_job)`` runs ``procrastinate_finish_job_v1``:
  ``UPDATE ... WHERE id = job_id AND status IN ('todo', 'doing')``, and raises when no row
  matched. No worker id, no attempt, no time is checked.

How the contract maps onto it, and what is *not* added:

* task id = the job's ``task_kwargs['task']``; one job per task (the adapter registers each task
  once, under a transaction-scoped advisory lock, as a producer that checks before it enqueues).
* states: ``todo`` -> pending, ``doing`` -> running, ``succeeded`` -> done, ``failed`` ->
  uncertain (``cancelled`` / ``aborted`` never occur here and read as uncertain).
* generation: the number of ``started`` events of the job, which procrastinate's own trigger
  writes inside the fetch statement. An observation, not a token: ``finish`` does not pass it on,
  because ``procrastinate_finish_job_v1`` takes a job id only.
* each contract worker name is one procrastinate worker of this process: registered at its first
  claim (after pruning stalled workers, as ``Worker.run`` does), with a heartbeat at each of its
  claims and at each ``extend`` (the harness's ``--heartbeat`` plays the heartbeat coroutine).
  ``extend`` returns ``now + lease`` whatever happened to the job: ``update_heartbeat`` is keyed by
  worker id and tells its caller nothing, so a worker never learns that its job was taken back.
* the contract's ``lease`` is the stalled-worker threshold: at the start of every claim the
  adapter runs the documented recipe with ``seconds_since_heartbeat = lease``, then fetches.
  ``lease_until`` = the worker's last heartbeat + lease (when the recipe may take the job back).
* ``finish`` returns False when ``procrastinate_finish_job_v1`` raised "not found or not in doing
  or todo status" (the only refusal it has), True when it returned.
* a worker pruned as stalled by another one (its heartbeat was older than the lease when that
  other worker started) has no row any more, and each of its fetches fails with a foreign-key
  violation; procrastinate's worker leaves its run loop with that error. The claim raises it, and
  the next claim of that worker name registers a new worker, as a supervisor restarting it would.
* ``close`` closes the connections and does not unregister the workers: procrastinate's graceful
  shutdown first waits for the running jobs, which a closing adapter cannot do, so a closed
  adapter's workers stay registered until their heartbeat goes stale, like a crashed worker's.

The clock: SQL ``NOW()`` is the harness's ``now`` (see pgcommon), and ``retry_job`` takes its
default ``retry_at`` from ``procrastinate.utils.utcnow``, replaced by the harness's ``now`` during
the recipe.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from takeover.adapters import pgcommon as pg
from takeover.contract import OUTCOMES, Claim, SnapshotRow

PINNED = "3.10.0"
pg.require_library("procrastinate", PINNED)

import procrastinate  # noqa: E402 - after the check, so a missing library is one line
import psycopg  # noqa: E402
from procrastinate import exceptions as _exceptions  # noqa: E402
from procrastinate import jobs as _jobs  # noqa: E402
from procrastinate import utils as _utils  # noqa: E402

NAME = "takeover.adapters.procrastinate:ProcrastinateAdapter"
QUEUE = "takeover"
TASK_NAME = "takeover.task"
STATE_NAMES = {
    "todo": "pending",
    "doing": "running",
    "succeeded": "done",
    "failed": "uncertain",
    "cancelled": "uncertain",
    "aborted": "uncertain",
}
OUTCOME_STATUS = {"done": _jobs.Status.SUCCEEDED, "uncertain": _jobs.Status.FAILED}
# procrastinate_finish_job_v1's RAISE when the job is neither todo nor doing (schema.sql).
FINISH_REFUSED = "Job was not found or not in"

ADAPTER_SCHEMA = "CREATE INDEX IF NOT EXISTS takeover_by_task ON procrastinate_jobs ((args->>'task'))"

GENERATION = "(SELECT count(*) FROM procrastinate_events e WHERE e.job_id = j.id AND e.type = 'started')"


@contextmanager
def _library_utcnow(now: float) -> Iterator[None]:
    """``retry_job``'s default ``retry_at`` is ``procrastinate.utils.utcnow()``: the harness's now."""
    stamp = pg.utc_datetime(now)
    saved: Callable[[], datetime.datetime] = _utils.utcnow
    _utils.utcnow = lambda: stamp
    try:
        yield
    finally:
        _utils.utcnow = saved


class ProcrastinateAdapter:
    """``takeover.adapters.procrastinate:ProcrastinateAdapter`` — procrastinate as it is."""

    # What each contract call is in procrastinate's API, for `takeover replay --issue`
    # (takeover._internal.replay.issue).
    library = "procrastinate"
    library_calls = {
        "register": "`JobManager.batch_defer_jobs_async([job])`",
        "claim": "`get_stalled_jobs(seconds_since_heartbeat={lease})`, `retry_job(job)` for each, then "
                 "`fetch_job(queues, worker_id)` (a new worker: `prune_stalled_workers`, `register_worker` first)",
        "extend": "`update_heartbeat(worker_id)`",
        "finish:done": "`finish_job_by_id_async(job_id, status=succeeded)`",
        "finish:uncertain": "`finish_job_by_id_async(job_id, status=failed)`",
    }
    library_states = {"pending": "todo", "running": "doing", "done": "succeeded", "uncertain": "failed"}

    databases = ("postgres",)  # the run's database must be a postgresql:// URL

    def __init__(self, db: str) -> None:
        self.url = pg.require_url(db, NAME)
        self._loop = pg.EventLoop()
        # One connection in the pool, so the clock set before a call is the one the call sees.
        connector = procrastinate.PsycopgConnector(
            conninfo=self.url, min_size=1, max_size=1, kwargs={"options": pg.CONNECT_OPTIONS}
        )
        self._app = procrastinate.App(connector=connector)
        self._loop.run(self._app.open_async())
        self._jm = self._app.job_manager
        with pg.setup_lock(self.url, "procrastinate") as (conn, installed):
            if not installed:
                self._loop.run(self._app.schema_manager.apply_schema_async())
                conn.execute(ADAPTER_SCHEMA)
                pg.mark_installed(conn, "procrastinate")
        self._conn = pg.connect(self.url)
        self._lease = pg.StoredLease(self._conn)
        self._workers: dict[str, int] = {}  # contract worker name -> procrastinate worker id
        self._held: dict[tuple[str, int], tuple[int, int]] = {}  # (task, generation) -> (job id, worker id)

    def _at(self, now: float) -> None:
        self._loop.run(self._jm.connector.execute_query_async(pg.SET_CLOCK, now=pg.clock_value(now)))

    # -- the contract ------------------------------------------------------------------------

    def register(self, task_id: str, now: float) -> None:
        self.register_many([task_id], now)

    def register_many(self, task_ids: list[str], now: float) -> None:
        """A producer that checks before it defers, under a lock so two producers cannot both miss."""
        with self._conn.transaction():
            self._conn.execute("SELECT pg_advisory_xact_lock(hashtext('takeover.register'))")
            known = {
                row[0]
                for row in self._conn.execute(
                    "SELECT args->>'task' FROM procrastinate_jobs WHERE args->>'task' = ANY(%s)", (task_ids,)
                )
            }
            new = [t for t in dict.fromkeys(task_ids) if t not in known]
            if new:
                self._at(now)
                self._loop.run(self._jm.batch_defer_jobs_async([
                    _jobs.Job(queue=QUEUE, task_name=TASK_NAME, lock=None, queueing_lock=None,
                              task_kwargs={"task": t})
                    for t in new
                ]))  # fmt: skip

    def claim(self, worker: str, now: float, lease: float) -> Claim | None:
        self._lease.remember(lease)
        self._at(now)
        worker_id = self._worker(worker, lease)
        self._retry_stalled(now, lease)
        try:
            job = self._loop.run(self._jm.fetch_job(queues=[QUEUE], worker_id=worker_id))
        except _exceptions.ConnectorException as exc:
            if isinstance(exc.__cause__, psycopg.errors.ForeignKeyViolation):
                # Another worker pruned this one as stalled: its row is gone, and every fetch with
                # its id now fails. procrastinate's worker leaves its run loop with this error; the
                # next claim registers a new worker, as a supervisor restarting it would.
                del self._workers[worker]
            raise
        if job is None or job.id is None:
            return None
        task = str(job.task_kwargs["task"])
        row = self._conn.execute(f"SELECT {GENERATION} FROM procrastinate_jobs j WHERE j.id = %s", (job.id,)).fetchone()
        generation = int(row[0]) if row else 0
        self._held[(task, generation)] = (job.id, worker_id)
        return task, generation, now + lease

    def extend(self, task_id: str, generation: int, now: float, lease: float) -> float | None:
        """procrastinate's heartbeat: by worker id, answering nothing about the job."""
        held = self._held.get((task_id, generation))
        if held is None:
            return None  # this process never held that generation: it has no worker to beat for
        self._at(now)
        self._loop.run(self._jm.update_heartbeat(held[1]))
        return now + lease

    def finish(self, task_id: str, generation: int, outcome: str, now: float) -> bool:
        """``generation`` is not passed on: procrastinate finishes a job by its id."""
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, got {outcome!r}")
        held = self._held.pop((task_id, generation), None)
        job_id = held[0] if held is not None else self._job_id(task_id)
        if job_id is None:
            return False
        self._at(now)
        try:
            self._loop.run(
                self._jm.finish_job_by_id_async(job_id=job_id, status=OUTCOME_STATUS[outcome], delete_job=False)
            )
        except _exceptions.ConnectorException as exc:
            if FINISH_REFUSED in str(exc.__cause__ or exc):
                return False
            raise
        return True

    def snapshot(self) -> list[SnapshotRow]:
        lease = self._lease.get()
        rows = self._conn.execute(
            f"SELECT j.args->>'task', j.status::text, {GENERATION}, w.last_heartbeat "
            "FROM procrastinate_jobs j LEFT JOIN procrastinate_workers w ON w.id = j.worker_id "
            "WHERE j.queue_name = %s ORDER BY j.id",
            (QUEUE,),
        ).fetchall()
        return [
            pg.snapshot_row(task, STATE_NAMES.get(status, f"unknown({status})"), generation, heartbeat, lease)
            for task, status, generation, heartbeat in rows
        ]

    def close(self) -> None:
        pg.shut(self._loop, self._app.close_async(), self._conn)

    # -- helpers -----------------------------------------------------------------------------

    def _worker(self, worker: str, lease: float) -> int:
        """The procrastinate worker behind a contract worker name: registered once, as
        ``Worker.run`` does (prune the stalled ones, register); afterwards each claim is a heartbeat."""
        worker_id = self._workers.get(worker)
        if worker_id is None:
            self._loop.run(self._jm.prune_stalled_workers(lease))
            worker_id = self._workers[worker] = self._loop.run(self._jm.register_worker())
        else:
            self._loop.run(self._jm.update_heartbeat(worker_id))
        return worker_id

    def _retry_stalled(self, now: float, lease: float) -> None:
        """The documented recipe for stalled jobs, run where a consumer's periodic task would run.
        A ``retry_job`` that raises (the job finished in the meantime) ends the pass, as it ends
        the periodic task; the next claim runs it again."""
        with _library_utcnow(now):
            stalled = self._loop.run(self._jm.get_stalled_jobs(seconds_since_heartbeat=lease))
            try:
                for job in stalled:
                    self._loop.run(self._jm.retry_job(job))
            except _exceptions.ConnectorException:
                pass

    def _job_id(self, task_id: str) -> int | None:
        row = self._conn.execute(
            "SELECT id FROM procrastinate_jobs WHERE args->>'task' = %s ORDER BY id LIMIT 1", (task_id,)
        ).fetchone()
        return None if row is None else int(row[0])
