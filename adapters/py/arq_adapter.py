"""arq 0.28.0 behind takeover's JSON-lines protocol (docs/reference/protocol.md): arq's own Worker, translated.

    --queue "exec:.venv-arq/bin/python adapters/py/arq_adapter.py" --db redis              (arq's defaults)
    --queue "exec:.venv-arq/bin/python adapters/py/arq_adapter.py --job-timeout 20" --db redis

Why a process of its own: arq 0.28.0 requires redis-py below 6 (``redis[hiredis]>=4.2.0,<6``), takeover's
environment has redis-py 8, and installing arq there would take it back to 5.3.1 under every other
adapter. So arq lives in ``.venv-arq`` (``make arq``: arq 0.28.0 and exactly its dependencies, pinned in
adapters/py/requirements-arq.txt; ``make test`` makes it first), and this adapter speaks the protocol from
there with nothing of takeover (adapters/py/protocol.py is Python's standard library only).

Each contract call is what arq's own ``Worker`` does, by arq's own code wherever arq has it as a method
(file:line into arq 0.28.0; docs/analyses/arq.md):

* register: ``ArqRedis.enqueue_job(FUNCTION, _job_id=task_id)`` (connections.py:119-177): WATCH the job
  key, nothing when the job or its result exists (:158), else the job key ``PSETEX``'d for
  ``expires_extra_ms`` (1 day, :170-174) and the id added to the ``arq:queue`` sorted set scored by now (:175).
* claim: one ``Worker._poll_iteration`` (worker.py:377-395): the due job ids, oldest first, up to
  ``queue_read_limit`` (:390-393), each handed to the Worker's own ``start_jobs`` (:436-476) until one
  starts: WATCH ``arq:in-progress:<id>``, skip it if that key exists (another worker runs it), else
  ``PSETEX`` it for ``in_progress_timeout_s`` (:465) and start ``run_job`` (:478): ``INCR arq:retry:<id>``
  (the try number: the generation, :482), then, when the job key has expired, fail it ("job expired",
  :514-516), when the try is beyond ``max_tries`` fail it ("max retries exceeded", :550-566), else call the
  job's function under ``asyncio.wait_for(task, job_timeout)`` (:599). The claim answers when the function
  has started (with its ``job_try``); a job that arq failed instead is not handed out, and the next is tried.
* finish: the function of that run returns (done) or raises (uncertain: arq records a failure and does
  not retry an ordinary exception, worker.py:610-634), and arq's ``run_job`` goes on to ``finish_job``
  (:682-711): result stored for ``keep_result``, in-progress, retry and job keys deleted, the id removed from
  the queue, by the job id alone. It answers nothing and refuses nothing: the adapter answers True once the
  function got the outcome. False only where arq's worker has no such run: a (task, generation) this
  process never started, or one whose run already ended (arq's own timeout cancelled it).
* no extend: arq has no heartbeat; the in-progress key is set once (hello: no ``extend``).
* snapshot: one Lua script (it runs alone): every registered task's job (queued, and in progress or not),
  its result (done when arq's ``JobResult.success``, else uncertain), and the adapter's observations.

Nothing is fenced that arq does not fence. Adapter bookkeeping, never read by arq: the registered ids
(``takeover:arq:tasks``), each hand-out's try number and lease end (``takeover:arq:gen:``,
``takeover:arq:until:``), and the paced clock's start (``takeover:arq:epoch``).

The lease and the clock. arq's lease is the in-progress key's TTL, ``in_progress_timeout_s`` = the
longest job timeout + 10 s (worker.py:276-277: 310 s by default), counted by the Redis server, never
renewed; inside it the worker cancels its own job at ``job_timeout`` (:599) and fails it for good (a
``TimeoutError`` is no ``Retry``, :610-634). The contract's lease *is* that TTL: a claim at ``now`` with
lease L sets the key to end at now + L, and arq's ``job_timeout`` is the same share of L as in production
(``--job-timeout S``, default 300: 300/310 of L; the 10 s are scaled alike). Real time stands for the
contract's: in stress runs ``now`` is this machine's clock, the Redis server's too; in the scenarios and
explore (a logical clock, ``now`` = 0, 1, 31, ...) every call first waits until 0.1 real s per logical
second have passed since the run's first call, and 50 ms more (``SLACK``: the key is set a few ms after
its end is computed), as adapters/js/paced.js, so a key runs out, and a job times out, when the logical
clock says; explore's ticks of 1/1024 s at a lease's end are below what real time resolves here. arq
reads ``arq.utils.timestamp_ms`` (imported by name into connections and worker): the adapter makes it
answer the last call's ``now`` (on the logical clock shifted by ``SHIFT``: arq skips a job whose score
is 0, worker.py:455). Not scaled: the keys' other TTLs
(a result's ``keep_result``, 3600 s; the job key's ``expires_extra_ms``, a day; the retry key's 88400 s) run
on the server's real clock, longer than any run. Faults that skew ``now`` set the key's end, as arq's
``PSETEX`` of a duration would not (as bullmq.js does).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import logging
import math
import sys
import time
from typing import Any

from arq import Worker, func
from arq.connections import ArqRedis
from arq.constants import default_queue_name
from arq.jobs import deserialize_result
from protocol import serve_async

FUNCTION = "takeover_task"
MARGIN = 10.0  # arq's in_progress_timeout_s = job timeout + 10 s (worker.py:277)
PACE = 0.1  # real seconds per logical second (the scenarios' clock)
LOGICAL = 1e8  # a `now` below this is a logical clock (the epoch is 1.7e9)
# Real seconds a paced call waits beyond its moment: a key set to end at a moment ends a little after it (the
# PSETEX is sent after its duration is computed), so a claim at a lease's very end waits those ms out.
SLACK = 0.05
SHIFT = 1000.0  # logical seconds added for arq's timestamps: it takes a score of 0 for none
TASKS = "takeover:arq:tasks"
GEN = "takeover:arq:gen:"
UNTIL = "takeover:arq:until:"
EPOCH = "takeover:arq:epoch"

SNAPSHOT = """
local rows = {}
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local queued = redis.call('ZSCORE', KEYS[2], id)
  local result = redis.call('GET', 'arq:result:' .. id)
  local gen = redis.call('GET', ARGV[1] .. id) or '0'
  local untl = redis.call('GET', ARGV[2] .. id) or ''
  rows[#rows + 1] = {id, queued and '1' or '0', result or '', gen, untl}
end
return rows
"""


# The library, as a bug report names it (`takeover replay --issue`, `takeover scenarios --file F --issue`).
LIBRARY = {
    "name": "arq",
    "version": importlib.metadata.version("arq"),
    "home": "https://github.com/python-arq/arq",
    "calls": {
        "register": "`ArqRedis.enqueue_job(function, _job_id=task)`",
        "claim": "`Worker.start_jobs([job_id])` (`PSETEX arq:in-progress:<id>` for {lease} s) and `Worker.run_job`",
        "finish:done": "the job's function returns; `Worker.finish_job(job_id, ...)`",
        "finish:uncertain": "the job's function raises; `Worker.finish_job(job_id, ...)` (a failure, not retried)",
        "snapshot": "`arq:queue`, `arq:in-progress:<id>` and `arq:result:<id>` (`JobResult.success`)",
    },
    "states": {
        "pending": "queued",
        "running": "in_progress",
        "done": "complete (success)",
        "uncertain": "complete (failed)",
    },
}


def options(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="arq_adapter.py", description="arq 0.28.0 behind takeover's protocol")
    parser.add_argument(
        "--job-timeout",
        type=float,
        default=300.0,
        help="arq's job_timeout in production seconds (default 300): its share of the lease",
    )
    parser.add_argument("--max-tries", type=int, default=5, help="arq's max_tries (default 5)")
    args = parser.parse_args(argv)
    if not (math.isfinite(args.job_timeout) and args.job_timeout > 0) or args.max_tries < 1:
        parser.error("--job-timeout must be a positive number of seconds and --max-tries at least 1")
    return args


class Clock:
    """arq's ``timestamp_ms`` and real time standing for the contract's ``now``."""

    def __init__(self) -> None:
        self.now = time.time()
        self.start: tuple[float, float] | None = None  # (logical, real) of the run's first call

    def ms(self) -> int:
        return int((self.now + (SHIFT if self.now < LOGICAL else 0.0)) * 1000)

    async def at(self, redis: ArqRedis, now: float) -> None:
        """Wait until real time stands at ``now``; arq reads ``now`` from here on."""
        self.now = now
        if now >= LOGICAL:
            return
        if self.start is None:
            await redis.set(EPOCH, f"{now!r} {time.time()!r}", nx=True)
            logical, real = (await redis.get(EPOCH)).decode().split()
            self.start = (float(logical), float(real))
        wait = self.real(now) + SLACK - time.time()
        if wait > 0:
            await asyncio.sleep(wait)

    def real(self, t: float) -> float:
        """The real time (s since the epoch) that stands for contract time ``t``."""
        if self.now >= LOGICAL or self.start is None:
            return t
        return self.start[1] + (t - self.start[0]) * PACE


CLOCK = Clock()


def _patch_arq_clock() -> None:
    import arq.connections
    import arq.worker

    arq.connections.timestamp_ms = CLOCK.ms
    arq.worker.timestamp_ms = CLOCK.ms


class Uncertain(Exception):
    """The function's outcome when takeover finishes a task ``uncertain``: arq fails the job, no retry."""


class ArqQueue:
    def __init__(self, redis: ArqRedis, settings: argparse.Namespace) -> None:
        self.redis = redis
        self.settings = settings
        self.snapshot_script = redis.register_script(SNAPSHOT)
        # the function's runs under way in this worker: job id -> (try, the future its outcome comes by)
        self.runs: dict[str, tuple[int, asyncio.Future[str]]] = {}
        self.started: asyncio.Future[tuple[str, int]] | None = None
        self.got: set[tuple[str, int]] = set()  # runs whose function received its outcome
        self.worker = Worker(
            functions=[func(self.takeover_task, name=FUNCTION)],
            redis_pool=redis,
            burst=True,
            handle_signals=False,
            max_jobs=1_000_000,  # takeover calls claim; arq's own cap on a worker's jobs is not the contract's
            queue_read_limit=100,  # what arq reads per poll with its default max_jobs, 10 (worker.py:252)
            job_timeout=settings.job_timeout,
            max_tries=settings.max_tries,
        )

    async def takeover_task(self, ctx: dict[str, Any]) -> str:
        """The job's function, as arq calls it: it runs until takeover's worker finishes the task."""
        job_id, job_try = ctx["job_id"], ctx["job_try"]
        outcome: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.runs[job_id] = (job_try, outcome)
        if self.started is not None and not self.started.done():
            self.started.set_result((job_id, job_try))
        try:
            result = await outcome
        finally:
            if self.runs.get(job_id, (None, None))[1] is outcome:
                del self.runs[job_id]
        self.got.add((job_id, job_try))
        if result == "uncertain":
            raise Uncertain("takeover: the task's outcome is uncertain")
        return result

    async def register(self, task_id: str, now: float) -> None:
        await CLOCK.at(self.redis, now)
        await self.redis.sadd(TASKS, task_id)
        await self.redis.enqueue_job(FUNCTION, _job_id=task_id)

    async def claim(self, worker: Any, now: float, lease: float) -> list[Any] | None:
        await CLOCK.at(self.redis, now)
        w = self.worker
        real_lease = max(0.001, CLOCK.real(now + lease) - time.time())  # the key ends at now + lease
        w.in_progress_timeout_s = real_lease
        w.job_timeout_s = real_lease * self.settings.job_timeout / (self.settings.job_timeout + MARGIN)
        job_ids = await self.redis.zrangebyscore(default_queue_name, min=float("-inf"), start=w._queue_read_offset,
                                                 num=w.queue_read_limit, max=CLOCK.ms())  # fmt: skip
        for job_id_b in job_ids:
            job_id = job_id_b.decode()
            before = w.tasks.get(job_id)
            self.started = asyncio.get_running_loop().create_future()
            await w.start_jobs([job_id_b])
            run = w.tasks.get(job_id)
            if run is None or run is before:
                continue  # held elsewhere, or gone
            await asyncio.wait({self.started, run}, return_when=asyncio.FIRST_COMPLETED)
            if not self.started.done():
                run.result()  # arq failed the job itself (expired, max tries): raise what run_job raised
                continue
            started_id, job_try = self.started.result()
            until = now + lease
            await self.redis.mset({GEN + started_id: job_try, UNTIL + started_id: repr(until)})
            return [started_id, job_try, until]
        return None

    async def finish(self, task_id: str, generation: int, outcome: str, now: float) -> bool:
        await CLOCK.at(self.redis, now)
        held = self.runs.get(task_id)
        if held is None or held[0] != generation or held[1].done():
            return False  # arq's worker has no such run: never started here, or ended (its timeout)
        held[1].set_result(outcome)
        run = self.worker.tasks.get(task_id)
        if run is not None:
            await run  # run_job to its end: finish_job written
        return (task_id, generation) in self.got

    async def snapshot(self) -> list[list[Any]]:
        rows = await self.snapshot_script(keys=[TASKS, default_queue_name], args=[GEN, UNTIL])
        out = []
        for task_b, queued, result, gen, until in rows:
            task_id = task_b.decode()
            if result:
                state = "done" if deserialize_result(result).success else "uncertain"
                out.append([task_id, state, int(gen), None])
            elif queued == b"1" and until:
                out.append([task_id, "running", int(gen), float(until)])
            elif queued == b"1":
                out.append([task_id, "pending", int(gen), None])
            # else: arq keeps nothing of it (no job, no result): left out, as arq has forgotten it
        return sorted(out)

    async def close(self) -> None:
        """The connection closed, nothing else: takeover's "worker exits" is a worker process that ends without
        arq's graceful shutdown (a crash, SIGKILL), so the in-progress keys of its runs stay until their TTL.
        arq's own shutdown on SIGINT/SIGTERM (``Worker.handle_sig``, worker.py:852-866) would cancel the runs
        and put each job back at once (``retry_jobs``, :625-627, and ``finish_job``'s delete, :695-696); the
        process leaves right after this answer (adapters/py/protocol.py), so none of that runs."""
        await self.redis.aclose()


def main() -> None:
    settings = options(sys.argv[1:])
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    logging.getLogger("arq.worker").setLevel(logging.CRITICAL)  # a failed job's traceback, every uncertain

    _patch_arq_clock()

    async def open_queue(url: str) -> ArqQueue:
        redis = ArqRedis.from_url(url)
        await redis.ping()  # connected before the first claim, so its key's end is not late by a connect
        return ArqQueue(redis, settings)

    serve_async({"databases": ["redis"], "library": LIBRARY}, open_queue)


if __name__ == "__main__":
    main()
