"""RQ 3.0.0 (PyPI, BSD-2-Clause, Redis) behind the queue contract.

Names: ``takeover.adapters.rq:RQAdapter`` (RQ's default: a job enqueued without ``retry``) and
``takeover.adapters.rq:RQRetryAdapter`` (jobs enqueued with ``retry=Retry(max=100)``, the setting that
makes RQ run an abandoned job again). Install: ``pip install 'takeover[rq]'``. Redis only (``--db redis``
or a ``redis://`` URL). File:line references into the release: docs/analyses/rq.md.

What RQ's own worker (``rq worker``: the forking ``Worker``) does, and what each contract call is:

* register: ``Queue.enqueue(func, job_id=task, unique=True)``: a job hash and its id pushed on the
  queue's list, in one script that raises ``DuplicateJobError`` when the job id exists.
* claim: one turn of ``Worker.work``: ``heartbeat()``, ``run_maintenance_tasks()`` when
  ``should_run_maintenance_tasks`` says so (every ``maintenance_interval``, 600 s, under a lock: it runs
  ``StartedJobRegistry.cleanup``, which fails or retries the jobs whose entry has expired), then
  ``Queue.dequeue_any`` (non-blocking, as ``work(burst=True)``), ``prepare_execution(job)`` (the parent:
  an Execution and a ``StartedJobRegistry`` entry scored now + heartbeat TTL) and
  ``prepare_job_execution(job)`` (the horse: status ``started``).
* extend: the parent's ``maintain_heartbeats(job, execution)`` (every ``job_monitoring_interval``, 30 s,
  while the horse runs): the registry entry is re-scored (``xx``: only if it is still there). It
  answers nothing; the adapter returns the entry's new expiry, or ``None`` when the entry is gone.
* finish done: the horse's ``_finalize_success(job, queue, execution, None)`` (ended_at, success
  callback, ``handle_job_success``: status ``finished``, entry removed); finish uncertain: the horse's
  ``_finalize_failure`` with an exception after ``job.retries_left = 0`` (RQ's documented idiom for a
  failure that must not be retried: ``handle_job_failure`` then fails it for good). Neither checks who
  holds the job: both return nothing, so ``finish`` returns True. A finish for a generation that was
  never handed out answers False without a call: RQ's horse only finishes the job it dequeued, and its
  success path cannot even run for a job that never started (it reads ``started_at``).

What is *not* added: no fence anywhere. The generation is an observation: the adapter counts hand-outs
(``INCR takeover:rq:handouts:ID`` right after the dequeue; RQ has no attempt counter it checks).

The clock. RQ reads ``rq.utils.now()`` (and ``current_timestamp()``, whole seconds, from it): the adapter
swaps that function in every ``rq`` module for the duration of each call. RQ's lease cannot be shorter
than 60 s: the registry entry lives for the heartbeat TTL, ``min(job timeout, job_monitoring_interval) +
60`` (90 s by default), whatever the worker asks. So RQ sees the harness's clock *dilated*: RQ-seconds
run ``90 / lease`` times as fast as the harness's, from ``EPOCH`` at the run's first call (stored in
Redis, so every process reads one clock), and a harness lease of 1 s is RQ's default 90 s lease exactly.
Every duration RQ compares is stretched alike (a worker frozen for 1.2 s was frozen for 108 RQ-seconds);
what is not stretched: Redis's own key TTLs (the maintenance lock's 899 s, a result's 500 s), which run
on the server's real clock (docs/analyses/rq.md, "what the dilation changes").
"""

from __future__ import annotations

import datetime
import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

from takeover.adapters.dilated import DilatedClock, swapped
from takeover.adapters.pins import require_library
from takeover.adapters.rediscommon import REDIS_URLS, connect
from takeover.contract import OUTCOMES, Claim, SnapshotRow

PINNED = "3.0.0"
BEFORE_FIX = "2.12.0"  # the last release before rq #2466 (the fix of rq #2424): run only to show the difference
VERSION = require_library("rq", (PINNED, BEFORE_FIX))
RQ2 = VERSION == BEFORE_FIX

import redis  # noqa: E402 - after the check, so a missing library is one line
import rq.utils  # noqa: E402
from rq import Queue, Retry, Worker  # noqa: E402
from rq.exceptions import DuplicateJobError  # noqa: E402
from rq.executions import Execution  # noqa: E402
from rq.job import Job, JobStatus  # noqa: E402

NAME = "takeover.adapters.rq:RQAdapter"
QUEUE = "takeover"
FUNC = "takeover.adapters.rq.perform"  # stored by name; takeover's workers do the work, never RQ
EPOCH = 1_767_225_600.0  # 2026-01-01 UTC: RQ's clock starts here at the run's first call
# RQ's default heartbeat TTL: min(job timeout 180, job_monitoring_interval 30) + 60 (Worker.get_heartbeat_ttl).
RQ_LEASE = 90.0
CLOCK_KEY = "takeover:rq:clock"  # hash: origin (the harness's first now), scale (RQ-seconds per second)
TASKS_KEY = "takeover:rq:tasks"  # the registered task ids
HANDOUTS = "takeover:rq:handouts:"  # + job id: hand-outs counted by the adapter (the generation)

STATES = {
    JobStatus.QUEUED.value: "pending",
    JobStatus.SCHEDULED.value: "pending",  # a retry with an interval waits here; none is configured
    JobStatus.STARTED.value: "running",
    JobStatus.FINISHED.value: "done",
    JobStatus.FAILED.value: "uncertain",
    JobStatus.STOPPED.value: "uncertain",
    JobStatus.CANCELED.value: "uncertain",
}

# One consistent read (a Lua script runs alone on the server): every task's status and hand-out
# count, and the started registry's entries (job_id:execution_id -> expiry in RQ-seconds).
SNAPSHOT_LUA = """
local ids = redis.call('SMEMBERS', KEYS[1])
local rows = {}
for _, id in ipairs(ids) do
  local status = redis.call('HGET', ARGV[1] .. id, 'status')
  local handouts = redis.call('GET', ARGV[2] .. id)
  rows[#rows + 1] = {id, status or '', handouts or '0'}
end
return {rows, redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')}
"""


UNCERTAIN = "takeover: the task's outcome is uncertain"


def _finish_rq2(w: Any, job: Any, queue: Queue, execution: Execution, outcome: str) -> None:
    """RQ 2.12.0 has no ``_finalize_success``/``_finalize_failure``: the tail of its ``perform_job``
    (worker/base.py:1555-1597), as the horse runs it, with the worker's one ``execution`` set."""
    w.execution = execution
    if outcome == "done":
        w.handle_execution_ended(job, queue, job.success_callback_timeout)
        job._result = None
        job._status = JobStatus.FINISHED
        job.execute_success_callback(w.death_penalty_class, None)
        w.handle_job_success(job=job, queue=queue, started_job_registry=queue.started_job_registry)
        job.send_webhooks(JobStatus.FINISHED)
        return
    job._status = JobStatus.FAILED
    w.handle_execution_ended(job, queue, job.failure_callback_timeout)
    try:
        raise RuntimeError(UNCERTAIN)
    except RuntimeError:
        exc_info = sys.exc_info()
    job.execute_failure_callback(w.death_penalty_class, *exc_info)
    w.handle_exception(job, *exc_info)
    w.handle_job_failure(job=job, exc_string=UNCERTAIN, queue=queue, started_job_registry=queue.started_job_registry)


def perform() -> None:
    """The job's function as RQ stores it; never called (takeover's worker does the task's work)."""


class RQClock(DilatedClock):
    """RQ's ``now()`` while a call runs: the harness's ``now``, dilated (module docstring)."""

    def __init__(self, conn: redis.Redis) -> None:
        super().__init__(conn, CLOCK_KEY, EPOCH, RQ_LEASE)

    @contextmanager
    def at(self, now: float, lease: float | None = None) -> Iterator[None]:
        if self.origin is None or (self.scale is None and lease is not None):
            self.load(now, lease)
        stamp = datetime.datetime.fromtimestamp(self.library_seconds(now), datetime.UTC)
        # every rq module that imported ``now`` by name (``current_timestamp`` calls ``rq.utils.now`` itself)
        with swapped("rq", "now", _REAL_NOW, lambda: stamp):
            yield


_REAL_NOW = rq.utils.now


class RQAdapter:
    """``takeover.adapters.rq:RQAdapter`` — RQ as ``rq worker`` runs it, jobs enqueued without retry."""

    # What each contract call is in RQ's API, for `takeover replay --issue` (takeover._internal.replay.issue).
    library = "rq"
    library_calls = {
        "register": "`Queue.enqueue(func, job_id=task, unique=True)`",
        "claim": "`Worker.heartbeat()`, `run_maintenance_tasks()` when due (`StartedJobRegistry.cleanup`), "
        "`Queue.dequeue_any`, `prepare_execution(job)`, `prepare_job_execution(job)`",
        "extend": "`Worker.maintain_heartbeats(job, execution)`",
        "finish:done": "`Worker._finalize_success(job, queue, execution, None)` (`handle_job_success`)",
        "finish:uncertain": "`Worker._finalize_failure(job, queue, execution, exc_info)` (`handle_job_failure`)",
    }
    library_states = {"pending": "queued", "running": "started", "done": "finished", "uncertain": "failed"}

    databases = ("redis",)  # the run's database must be a redis:// URL
    retry: Retry | None = None  # RQ's default: an abandoned or failed job is not run again

    @staticmethod
    def library_settings(lease: float, heartbeat: float | None) -> list[str]:
        """``takeover tune``'s lease (production seconds) in RQ's settings. The lease is RQ's heartbeat TTL,
        ``min(job timeout, job_monitoring_interval) + 60`` (worker/base.py:1124), renewed every
        ``job_monitoring_interval``: one setting decides both the lease and the heartbeat."""
        interval = math.ceil(lease) - 60
        if interval < 1:
            return [f"RQ cannot hold a job for only {lease:g} s: its heartbeat TTL is job_monitoring_interval + 60 s, "
                    "at least 61 s (job_monitoring_interval=1); its takeovers come no sooner"]  # fmt: skip
        lines = [
            f"Worker(job_monitoring_interval={interval}) (rq worker --job-monitoring-interval {interval}): "
            f"a heartbeat TTL of {interval + 60} s, renewed every {interval} s",
            f"job_timeout above your longest task and at least {interval} s (RQ stops a job at its timeout)",
            "enqueue with retry=Retry(max=N): without it an abandoned job is failed, not run again",
        ]
        if heartbeat is not None and abs(heartbeat - interval) >= 1:
            lines.append(f"the recommended heartbeat (every {heartbeat:g} s) is not a setting of its own in RQ: "
                         f"it beats every job_monitoring_interval ({interval} s)")  # fmt: skip
        return lines

    def __init__(self, db: str) -> None:
        self.conn = connect(NAME, db, (*REDIS_URLS, "unix://"))
        self.queue = Queue(QUEUE, connection=self.conn)
        self.clock = RQClock(self.conn)
        self._snapshot = self.conn.register_script(SNAPSHOT_LUA)
        self._workers: dict[str, Worker] = {}  # contract worker name -> the RQ worker of this process
        self._held: dict[tuple[str, int], tuple[Job, Execution, Worker]] = {}

    # -- the contract ------------------------------------------------------------------------

    def register(self, task_id: str, now: float) -> None:
        self.register_many([task_id], now)

    def register_many(self, task_ids: list[str], now: float) -> None:
        """``unique=True``: RQ's own dedupe (one Lua script, rq/scripts.py) refuses a job id that exists."""
        with self.clock.at(now):
            for task in dict.fromkeys(task_ids):
                self.conn.sadd(TASKS_KEY, task)  # first: snapshot() skips an id with no job yet
                try:
                    self.queue.enqueue(FUNC, job_id=task, retry=self.retry, unique=True)
                except DuplicateJobError:
                    continue

    def claim(self, worker: str, now: float, lease: float) -> Claim | None:
        with self.clock.at(now, lease):
            w = self._worker(worker)
            w.heartbeat()
            if w.should_run_maintenance_tasks:
                w.run_maintenance_tasks()
            result = Queue.dequeue_any([self.queue], None, connection=self.conn)
            if result is None:
                return None
            job, queue = result
            generation = int(self.conn.incr(HANDOUTS + job.id))
            execution = w.prepare_execution(job)
            w.prepare_job_execution(job, remove_from_intermediate_queue=True)
            job.started_at = rq.utils.now()
        self._held[(job.id, generation)] = (job, execution, w)
        return job.id, generation, self._expiry(execution) or now + lease

    def extend(self, task_id: str, generation: int, now: float, lease: float) -> float | None:
        held = self._held.get((task_id, generation))
        if held is None:
            return None  # this process never held that generation: it has no horse to beat for
        job, execution, w = held
        with self.clock.at(now, lease):
            if RQ2:
                rq2: Any = w  # RQ 2.12.0: one execution per worker, and no execution argument
                rq2.execution = execution
                rq2.maintain_heartbeats(job)
            else:
                w.maintain_heartbeats(job, execution)
        return self._expiry(execution)

    def finish(self, task_id: str, generation: int, outcome: str, now: float) -> bool:
        """What the horse does when the job returns (done) or raises (uncertain); nothing is checked."""
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, got {outcome!r}")
        held = self._held.pop((task_id, generation), None)
        if held is None:
            if not 1 <= generation <= int(self.conn.get(HANDOUTS + task_id) or 0):
                return False  # never handed out: no horse of RQ's holds it, so there is nothing to call
            held = self._adopt(task_id)
        if held is None:
            return False  # no such job: nothing RQ could finish
        job, execution, w = held
        with self.clock.at(now):
            if outcome == "uncertain":
                # Not to be run again: RQ has no such outcome; its documentation's idiom is to set the
                # job's retries_left to 0 before it fails (docs/analyses/rq.md). Without Retry it is 0 anyway.
                job.retries_left = 0
            if RQ2:
                _finish_rq2(w, job, self.queue, execution, outcome)
            elif outcome == "done":
                w._finalize_success(job, self.queue, execution, None)
            else:
                try:
                    raise RuntimeError(UNCERTAIN)
                except RuntimeError:
                    w._finalize_failure(job, self.queue, execution, sys.exc_info())
            if not RQ2:
                w.executions.pop(execution.id, None)  # the parent drops it after the horse (monitor_work_horse)
        return True

    def snapshot(self) -> list[SnapshotRow]:
        rows, entries = self._snapshot(
            keys=[TASKS_KEY, self.queue.started_job_registry.key], args=[Job.redis_job_namespace_prefix, HANDOUTS]
        )
        expiry: dict[str, float] = {}
        for member, score in zip(entries[::2], entries[1::2], strict=True):
            job_id = member.decode().rsplit(":", 1)[0]
            expiry[job_id] = max(expiry.get(job_id, float("-inf")), float(score))
        out: list[SnapshotRow] = []
        for raw_id, raw_status, raw_handouts in rows:
            task, status = raw_id.decode(), raw_status.decode()
            if not status and int(raw_handouts) == 0:
                continue  # register() in flight: the id is listed, its job not enqueued yet
            state = STATES.get(status, f"unknown({status or 'no job hash'})")
            until = self.clock.harness_time(expiry[task]) if state == "running" and task in expiry else None
            out.append((task, state, int(raw_handouts), until))
        out.sort()
        return out

    def close(self) -> None:
        self.conn.close()

    # -- helpers -----------------------------------------------------------------------------

    def _worker(self, worker: str) -> Worker:
        """The RQ worker behind a contract worker name, born as ``Worker.work`` bootstraps one."""
        w = self._workers.get(worker)
        if w is None:
            w = self._workers[worker] = Worker([self.queue], connection=self.conn, name=f"takeover-{worker}-{id(self)}")
            w.register_birth()
        return w

    def _expiry(self, execution: Execution) -> float | None:
        score = self.conn.zscore(self.queue.started_job_registry.key, execution.composite_key)
        return None if score is None else self.clock.harness_time(float(score))

    def _adopt(self, task_id: str) -> tuple[Job, Execution, Worker] | None:
        """A finish from a process that did not claim (a scenario's reopened worker): the job and its
        newest execution, finished by a worker of this process, as a restarted horse would."""
        if not Job.exists(task_id, connection=self.conn):
            return None
        job = Job.fetch(task_id, connection=self.conn)
        newest = cast(list[bytes], self.conn.zrevrange(f"rq:executions:{task_id}", 0, 0))
        execution = (
            Execution.from_composite_key(newest[0].decode(), self.conn)
            if newest
            else Execution(id="none", job_id=task_id, connection=self.conn)
        )
        return job, execution, self._worker("adopted")


class RQRetryAdapter(RQAdapter):
    """``takeover.adapters.rq:RQRetryAdapter`` — jobs enqueued with ``retry=Retry(max=100)``: RQ's
    documented way to run a failed job again, and the only way it runs an abandoned one again."""

    retry = Retry(max=100)
