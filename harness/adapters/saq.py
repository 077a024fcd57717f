"""SAQ 0.26.4 (PyPI, MIT; https://github.com/tobymao/saq) with its Redis queue behind the queue contract.

Names: ``takeover.adapters.saq:SAQAdapter`` (SAQ's defaults: the lease is the job's ``timeout``, 10 s;
no heartbeat; ``retries=1``, one attempt; the sweep every 60 s), ``takeover.adapters.saq:SAQRetryAdapter``
(the same with ``retries=100``: a swept job runs again) and ``takeover.adapters.saq:SAQHeartbeatAdapter``
(the safer settings: ``heartbeat=10``, the lease, renewed by ``job.update()``; ``timeout=0``, off;
``retries=100``; the sweep every 10 s, one lease). Install: ``pip install 'takeover[saq]'``. Redis only
(``--db redis``). File:line references into the release: docs/analyses/saq.md.

What SAQ's worker (``saq`` / ``Worker.start``: ``upkeep`` timers beside ``concurrency`` ``process`` loops)
does, and what each contract call is:

* register: ``queue.enqueue(function, key=task, timeout=T, heartbeat=H, retries=R)``: one Lua script
  that stores the job and pushes its id, refused (``None``) while the key is in the queue's
  ``incomplete`` set. Passed through: what SAQ dedupes is what the contract sees.
* claim: the worker's ``upkeep`` sweep when its timer is due (``Queue.sweep(lock, abort)``: at a
  worker's start, then every ``timers['sweep']``; one ``SETEX`` lock of as many seconds for all
  workers), then one ``process`` turn up to the task: ``queue.dequeue()`` (``BLMOVE`` queued ->
  active, then ``GET`` of the job), ``job.started = now()``, ``job.attempts += 1``,
  ``job.worker_id = ...``, ``job.update(status=ACTIVE)``.
* extend (``SAQHeartbeatAdapter`` only; SAQ beats only when the task calls ``job.update()``): the
  worker's ``abort`` timer for this job (a status ``aborting``/``aborted`` cancels the task and is
  recorded by ``finish_abort``: ``None``, the lease is lost), else the task's ``job.update()``.
* finish: the tail of ``process``: the abort timer's check as above (``False``); the job's own
  ``timeout`` (``asyncio.wait_for``) passed on the holder's clock: the task was cancelled, and the
  worker's ``except Exception`` retries the job (``job.retry``, retries left) or fails it
  (``job.finish(FAILED)``) (``False``); otherwise ``job.finish(COMPLETE)`` (done) or, for uncertain,
  the exception path with no retries left: ``job.finish(FAILED)``. No call checks who holds the job;
  a finish for a generation never handed out answers False without a call.

The generation is an observation: the adapter counts hand-outs (``INCR``); SAQ's ``attempts`` is
rewritten by every holder's ``job.update()``, a stale one's included.

The clock. SAQ reads ``saq.utils.now()`` (epoch ms) for ``started``, ``touched`` and the sweep's
``stuck`` test: the adapter swaps it in every ``saq`` module during each call. SAQ's settings are whole
seconds (``timeout``, ``heartbeat``, ``timers``), so SAQ sees the harness's clock *dilated*, as the RQ
adapter does: SAQ-seconds run ``LEASE / lease`` times as fast as the harness's (LEASE the class's
timeout, or heartbeat), from ``EPOCH`` at the run's first call (stored in Redis: one clock for every
process). A harness lease of 1 s is then SAQ's 10 s ``timeout`` exactly and its 60 s sweep is 6 s.
Two durations run on other clocks and are scaled by hand: the sweep's lock, a ``SETEX`` on the Redis
server's real clock, is ``sweep / scale`` real seconds (at least 1); the sweep's wait for a holder to
confirm an abort (``abort``, 5 s) is ``5 / scale`` real seconds. On the scenarios' logical clock
(``now`` an hour or more from ``time.time()``) no real time passes: the adapter deletes the lock when
its logical time is up (the one write outside SAQ's, only there) and the abort wait is 1 ms.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

from takeover.adapters.dilated import DilatedClock, swapped
from takeover.adapters.pins import require_library
from takeover.adapters.rediscommon import connect
from takeover.contract import OUTCOMES, Claim, SnapshotRow

PINNED = "0.26.4"
VERSION = require_library("saq", PINNED)

import redis  # noqa: E402 - after the check, so a missing library is one line
import saq.utils  # noqa: E402
from saq.job import Job, Status  # noqa: E402
from saq.queue.redis import RedisQueue  # noqa: E402

NAME = "takeover.adapters.saq:SAQAdapter"
QUEUE = "takeover"  # the queue's name: its keys are saq:takeover:*, its jobs saq:job:takeover:KEY
FUNCTION = "takeover.task"  # the job's function by name; takeover's worker does the work, never SAQ
EPOCH = 1_767_225_600.0  # 2026-01-01 UTC: SAQ's clock starts here at the run's first call
ABORT_WAIT = 5.0  # Queue.sweep's default abort: seconds the sweep waits for a holder to confirm an abort
DEQUEUE_WAIT = 0.01  # seconds a claim's BLMOVE waits for a job (SAQ's Worker default, 0, waits forever)
LOGICAL = 3600.0  # a `now` this far from time.time() is the scenarios' logical clock
LOGICAL_LOCK = 3600  # the sweep lock's real TTL on the logical clock: only the adapter's emulation frees it
CLOCK_KEY = "takeover:saq:clock"  # hash: origin (the harness's first now), scale (SAQ-seconds per second)
TASKS_KEY = "takeover:saq:tasks"  # the registered task ids
HANDOUTS_KEY = "takeover:saq:handouts"  # hash: task id -> hand-outs counted by the adapter (the generation)
LOCK_UNTIL_KEY = "takeover:saq:sweep-lock-until"  # logical clock only: when the sweep lock's time is up
UNCERTAIN = "takeover: the task's outcome is uncertain"
TIMED_OUT = "takeover: the job's timeout passed before it finished (asyncio.TimeoutError)"

STATES = {
    Status.NEW.value: "pending",
    Status.QUEUED.value: "pending",
    Status.ACTIVE.value: "running",
    Status.ABORTING.value: "running",  # the sweep's abort under way: still held until it retries or aborts it
    Status.COMPLETE.value: "done",
    Status.FAILED.value: "uncertain",
    Status.ABORTED.value: "uncertain",  # swept with no retries left: SAQ gives it up
}
ABORTS = (Status.ABORTING, Status.ABORTED)

# One consistent read (a Lua script runs alone): every registered task's stored job and hand-out count.
SNAPSHOT_LUA = """
local rows = {}
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  rows[#rows + 1] = {id, redis.call('GET', ARGV[1] .. id) or '', redis.call('HGET', KEYS[2], id) or '0'}
end
return rows
"""


class SAQClock(DilatedClock):
    """SAQ's ``now()`` while a call runs: the harness's ``now``, dilated (module docstring)."""

    def __init__(self, conn: redis.Redis, saq_lease: float) -> None:
        super().__init__(conn, CLOCK_KEY, EPOCH, saq_lease)
        self.lease: float | None = None  # the run's lease (harness seconds): SAQ's `saq_lease` seconds

    def harness_time(self, library_seconds: float) -> float:
        """The harness's ``now`` that gave SAQ this time, when this process gave it (exact: epoch milliseconds
        carry a float error of about 1e-6 s, and the scenarios and explore compare lease ends exactly);
        computed otherwise."""
        seen = _SEEN.get((self.origin, self.scale, library_seconds * 1000))
        return seen if seen is not None else super().harness_time(library_seconds)

    def harness_duration(self, saq_seconds: float) -> float:
        """A SAQ duration (a timeout, a heartbeat) in harness seconds: ``saq_seconds * lease / LEASE``, exact for
        the lease itself."""
        if self.lease is None:
            self._read()
        return saq_seconds * (self.lease or 1.0) / self.library_lease if self.lease else saq_seconds

    def load(self, now: float, lease: float | None) -> None:
        if lease is not None and self.scale is None:
            self.conn.hsetnx(self.key, "lease", repr(lease))  # beside the scale, for exact durations
        super().load(now, lease)

    def _read(self) -> None:
        super()._read()
        stored = cast(bytes | None, self.conn.hget(self.key, "lease"))
        self.lease = float(stored) if stored is not None else None

    def real_seconds(self, saq_seconds: float) -> float:
        """A SAQ duration in harness seconds (what a server-side TTL or a real wait must last)."""
        return saq_seconds / (self.scale or 1.0)

    @contextmanager
    def at(self, now: float, lease: float | None = None) -> Iterator[None]:
        if self.origin is None or (self.scale is None and lease is not None):
            self.load(now, lease)
        # SAQ's now() is whole milliseconds; dilated, a millisecond of SAQ's would be up to 1 / scale ms of
        # the harness's (3 ms in the scenarios), so the adapter keeps the fraction: a lease end maps back exactly
        ms = self.library_seconds(now) * 1000
        if len(_SEEN) > SEEN_MAX:
            _SEEN.clear()
        _SEEN[(self.origin, self.scale, ms)] = now
        with swapped("saq", "now", _REAL_NOW, lambda: ms):
            yield


_REAL_NOW = saq.utils.now
# (origin, scale, SAQ's epoch ms) -> the harness's now that gave it, in this process (SAQClock.harness_time)
_SEEN: dict[tuple[float | None, float | None, float], float] = {}
SEEN_MAX = 200_000


def logical(now: float) -> bool:
    return abs(now - time.time()) > LOGICAL


class SAQAdapter:
    """``takeover.adapters.saq:SAQAdapter`` — SAQ's defaults: ``timeout=10``, no heartbeat, ``retries=1``,
    the sweep every 60 s."""

    library = "saq"
    library_calls = {
        "register": "`queue.enqueue(function, key=task, timeout=..., heartbeat=..., retries=...)`",
        "claim": "`Queue.sweep(lock, abort)` when the worker's sweep timer is due, then `queue.dequeue()` "
        "(`BLMOVE` queued -> active), `job.attempts += 1`, `job.update(status=Status.ACTIVE)`",
        "extend": "the worker's abort check (`Worker.abort`), then `job.update()` (the task's heartbeat)",
        "finish:done": "`job.finish(Status.COMPLETE)` (after the worker's abort check and its job timeout)",
        "finish:uncertain": "`job.finish(Status.FAILED, error=...)` (the worker's exception path, no retries left)",
    }
    library_states = {"pending": "queued", "running": "active", "done": "complete", "uncertain": "failed or aborted"}

    databases = ("redis",)
    # SAQ's settings, in SAQ-seconds: the job's (Job's fields) and the worker's sweep timer
    timeout = 10  # Job.timeout's default
    heartbeat = 0  # Job.heartbeat's default: off
    retries = 1  # Job.retries's default: one attempt, so a swept job is aborted
    sweep = 60  # Worker's timers['sweep'] default (and its lock)

    @classmethod
    def library_settings(cls, lease: float, heartbeat: float | None) -> list[str]:
        """``takeover tune``'s lease (production seconds) in SAQ's settings: a job is stuck ``timeout``
        seconds after it started, or ``heartbeat`` seconds after its last ``job.update()`` (whole seconds,
        job.py), and the sweep that takes stuck jobs back runs every ``timers['sweep']`` seconds."""
        seconds = max(1, math.ceil(lease))
        sweep = max(1, math.ceil(lease / 2))
        if heartbeat is None:
            lines = [
                f"queue.enqueue(..., timeout={seconds}, retries=N): a job still active {seconds} s after it "
                "started is stuck; SAQ's own worker stops it then too, so timeout above your longest task",
            ]
        else:
            lines = [
                f"queue.enqueue(..., heartbeat={seconds}, timeout=0, retries=N) (or timeout above your longest task): "
                f"a job not updated for {seconds} s is stuck",
                f"in the task, await ctx['job'].update() every {heartbeat:g} s: SAQ's heartbeat is the task's own call",
            ]
        lines += [
            "retries=N above 1: with retries=1 (the default, one attempt) a swept job is aborted, never run again",
            f"Worker(..., timers={{'sweep': {sweep}}}) (default 60): a stuck job is taken back only by a sweep, "
            f"at most one per {sweep} s for all workers (its lock)",
        ]
        return lines

    def __init__(self, db: str) -> None:
        self.conn = connect(NAME, db)
        self.loop = asyncio.new_event_loop()
        self.queue = RedisQueue.from_url(db, name=QUEUE)
        self.clock = SAQClock(self.conn, float(self.heartbeat or self.timeout))
        self._snapshot = self.conn.register_script(SNAPSHOT_LUA)
        self._next_sweep: dict[str, float] = {}  # contract worker -> SAQ-seconds its sweep timer is next due
        self._held: dict[tuple[str, int], Job] = {}  # (task, generation) -> the holder's copy of the job

    # -- the contract ------------------------------------------------------------------------

    def register(self, task_id: str, now: float) -> None:
        self.register_many([task_id], now)

    def register_many(self, task_ids: list[str], now: float) -> None:
        with self.clock.at(now):
            for task in dict.fromkeys(task_ids):
                self.conn.sadd(TASKS_KEY, task)  # first: snapshot() skips an id with no job yet
                self._run(
                    self.queue.enqueue(
                        FUNCTION, key=task, timeout=self.timeout, heartbeat=self.heartbeat, retries=self.retries
                    )
                )

    def claim(self, worker: str, now: float, lease: float) -> Claim | None:
        job = self._dequeue(worker, now, lease)
        return None if job is None else self._start(worker, job, now, lease)

    def finish(self, task_id: str, generation: int, outcome: str, now: float) -> bool:
        """The tail of ``Worker.process``: nothing compares the holder with the job's current holder."""
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, got {outcome!r}")
        job = self._held.pop((task_id, generation), None)
        if job is None:
            if not 1 <= generation <= self._handouts(task_id):
                return False  # never handed out: no process() of SAQ's runs it, so there is nothing to call
            job = self._adopt(task_id)
            if job is None:
                return False  # no such job: nothing SAQ could finish
        with self.clock.at(now):
            return bool(self._run(self._finish(job, outcome)))

    def snapshot(self) -> list[SnapshotRow]:
        rows = cast(list[list[bytes]], self._snapshot(keys=[TASKS_KEY, HANDOUTS_KEY], args=[f"saq:job:{QUEUE}:"]))
        out: list[SnapshotRow] = []
        for raw_id, raw_job, raw_handouts in rows:
            task, generation = raw_id.decode(), int(raw_handouts)
            if not raw_job:
                if generation == 0:
                    continue  # register() in flight: the id is listed, its job not stored yet
                out.append((task, "unknown(no job stored)", generation, None))
                continue
            job = self._parse(raw_job)
            if job is None:
                out.append((task, f"unknown(unreadable job {raw_job[:60]!r})", generation, None))
                continue
            state = STATES.get(job.status.value, f"unknown({job.status.value})")
            out.append((task, state, generation, self._until(job) if state == "running" else None))
        out.sort()
        return out

    def close(self) -> None:
        try:
            self._run(self.queue.disconnect())
        finally:
            self.loop.close()
            self.conn.close()

    # -- the steps of a claim (two, so a test can put another worker between them: saq #277) --

    def _dequeue(self, worker: str, now: float, lease: float) -> Job | None:
        """The worker's due sweep, then ``queue.dequeue()``: the job's id moved onto the active list."""
        with self.clock.at(now, lease):
            self._upkeep(worker, now)
            return cast(Job | None, self._run(self.queue.dequeue(timeout=DEQUEUE_WAIT)))

    def _start(self, worker: str, job: Job, now: float, lease: float) -> Claim:
        """``Worker.process`` from the dequeue to the task's start: the job recorded ``active``."""
        generation = int(self.conn.hincrby(HANDOUTS_KEY, job.key, 1))
        with self.clock.at(now, lease):
            job.started = saq.utils.now()
            job.attempts += 1
            job.worker_id = self._worker_id(worker)
            self._run(job.update(status=Status.ACTIVE))
        self._held[(job.key, generation)] = job
        return job.key, generation, self._until(job) or now + lease

    # -- helpers -----------------------------------------------------------------------------

    def _run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def _worker_id(self, worker: str) -> str:
        return f"takeover-{worker}-{id(self)}"

    def _handouts(self, task_id: str) -> int:
        return int(cast(bytes | None, self.conn.hget(HANDOUTS_KEY, task_id)) or 0)

    def _upkeep(self, worker: str, now: float) -> None:
        """``Worker.upkeep``'s sweep timer: at the worker's first turn, then every ``sweep`` SAQ-seconds,
        ``Queue.sweep(lock=sweep, abort=5)``, its lock and its wait on their own clocks (module docstring)."""
        saq_now = self.clock.library_seconds(now)
        if saq_now < self._next_sweep.get(worker, float("-inf")):
            return
        self._next_sweep[worker] = saq_now + self.sweep
        lock, wait = max(1, round(self.clock.real_seconds(self.sweep))), self.clock.real_seconds(ABORT_WAIT)
        if logical(now):
            until = cast(bytes | None, self.conn.get(LOCK_UNTIL_KEY))
            if until is not None and now >= float(until):
                self.conn.delete(self.queue.namespace("sweep"), LOCK_UNTIL_KEY)
            lock, wait = LOGICAL_LOCK, 0.001
        self._run(self.queue.sweep(lock=lock, abort=wait))
        if logical(now):
            self.conn.set(LOCK_UNTIL_KEY, repr(now + self.clock.real_seconds(self.sweep)), nx=True)

    async def _aborted(self, job: Job) -> bool:
        """``Worker.abort`` (the abort timer) for one job: an ``aborting`` or ``aborted`` status cancels the
        task; ``finish_abort`` records it, then ``process``'s CancelledError path finishes it ``aborted``."""
        stored = await self.queue.job(job.key)
        if stored is None or stored.status not in ABORTS:
            return False
        await self.queue.finish_abort(stored)
        await job.finish(Status.ABORTED, error=stored.error or "abort")
        return True

    async def _finish(self, job: Job, outcome: str) -> bool:
        if await self._aborted(job):
            return False
        if job.timeout and saq.utils.seconds(saq.utils.now() - job.started) >= job.timeout:
            # process()'s asyncio.wait_for(task, job.timeout) raised first: the task is cancelled and the
            # worker's `except Exception` retries the job while retries are left, else fails it
            if job.retryable:
                await job.retry(TIMED_OUT)
            else:
                await job.finish(Status.FAILED, error=TIMED_OUT)
            return False
        if outcome == "done":
            await job.finish(Status.COMPLETE, result=None)
        else:  # the exception path with no retries left (a retry would make it claimable again)
            await job.finish(Status.FAILED, error=UNCERTAIN)
        return True

    def _until(self, job: Job) -> float | None:
        """When the sweep may take the job: ``Job.stuck``, ``timeout`` after ``started`` or ``heartbeat``
        after ``touched`` (strictly after: job.py), on the harness's clock."""
        clock, ends = self.clock, []
        if job.timeout:
            ends.append(clock.harness_time(saq.utils.seconds(job.started)) + clock.harness_duration(job.timeout))
        if job.heartbeat:
            ends.append(clock.harness_time(saq.utils.seconds(job.touched)) + clock.harness_duration(job.heartbeat))
        return min(ends) if ends else None

    def _parse(self, raw: bytes) -> Job | None:
        try:
            return self.queue.deserialize(raw)
        except (ValueError, TypeError, KeyError, json.JSONDecodeError):
            return None

    def _adopt(self, task_id: str) -> Job | None:
        """A finish from a process that did not claim (a scenario's reopened worker): the stored job."""
        return cast(Job | None, self._run(self.queue.job(task_id)))


class SAQRetryAdapter(SAQAdapter):
    """``takeover.adapters.saq:SAQRetryAdapter`` — SAQ's defaults with ``retries=100``: a swept job runs again."""

    retries = 100


class SAQHeartbeatAdapter(SAQRetryAdapter):
    """``takeover.adapters.saq:SAQHeartbeatAdapter`` — the safer settings: ``heartbeat=10`` (the lease, renewed
    by the task's ``job.update()``), ``timeout=0`` (off), ``retries=100``, the sweep every 10 s."""

    timeout = 0
    heartbeat = 10
    sweep = 10

    def extend(self, task_id: str, generation: int, now: float, lease: float) -> float | None:
        """The worker's abort timer for this job, then the task's heartbeat, ``job.update()``."""
        job = self._held.get((task_id, generation))
        if job is None:
            return None  # this process never held that generation: it runs no task to beat for
        with self.clock.at(now, lease):
            if self._run(self._aborted(job)):
                self._held.pop((task_id, generation), None)
                return None
            self._run(job.update())
        return self._until(job)
