"""``takeover bench --db redis``: the queue figure of the bench on Redis, and the reference queue's rate per
persistence mode.

- ``queue_vs_raw``: the Redis reference queue's claim+finish against a bare redis-py loop running the very
  scripts the queue runs (its ``CLAIM`` and ``FINISH`` Lua, same keys and arguments, one client), each on an
  empty database of the served server: the ratio is the queue's Python layer (its checks, its request ids,
  its answer's conversion). Target >= 0.9, as on SQLite and PostgreSQL.
- ``redis_persistence`` (bench.json, no target): the reference queue's claim+finish pairs per second on a
  server of each ``--redis-persistence`` mode (always: an fsync before every reply; everysec; none): what
  durability costs, which a user weighs against the power losses that everysec and none do not survive.

``workers4_vs_raw`` is not measured on Redis: a run has a server of its own (takeover._internal.run.redis_site), so its
baseline would run on another server than its run.
"""

from __future__ import annotations

import time
from typing import Any

from takeover._internal.db.redis_server import PERSISTENCE, PrivateRedis
from takeover.benchmarks import postgres, queue_raw
from takeover.benchmarks.timing import WALL
from takeover.queues.redis_lease import PENDING, REQUEST, RUNNING, TASK, RedisLeaseQueue, number

REQUEST_TTL_MS = 300_000


class FreshDatabases(postgres.FreshDatabases):
    """``queue_raw.FreshQueues`` for Redis: an empty database of the served server with ``tasks`` pending
    tasks, for every repetition (PostgreSQL's, with the Redis queue and a bare redis-py client)."""

    QUEUE = RedisLeaseQueue

    def raw(self) -> Any:
        """A bare redis-py client of a fresh database, with the queue's two scripts loaded."""
        from takeover._internal.db import redis as redis_db

        client = self.track(redis_db.connect(self.path(), decode_responses=True))
        return client, client.register_script(RedisLeaseQueue.CLAIM), client.register_script(RedisLeaseQueue.FINISH)


_raw_calls = 0


def raw_pairs(raw: Any, pairs: int) -> int:
    """The baseline: the queue's own two scripts with the queue's keys and arguments, nothing around them."""
    global _raw_calls
    _, claim, finish = raw
    now = 1.0
    args = [number(now), number(now + queue_raw.LEASE), "bench", REQUEST_TTL_MS]
    for _ in range(pairs):
        _raw_calls += 1
        task_id, generation, _until = claim(keys=[PENDING, RUNNING, f"{REQUEST}raw:{_raw_calls}:c"], args=args)
        finish(keys=[TASK + task_id, RUNNING, f"{REQUEST}raw:{_raw_calls}:f"],
               args=[task_id, str(generation), number(now), "done", REQUEST_TTL_MS])  # fmt: skip
    return pairs


def queue_vs_raw(pairs: int, repetitions: int) -> dict[str, Any]:
    return queue_raw.measure(pairs, repetitions, fresh_queues=FreshDatabases, raw=raw_pairs, clock=WALL)


def persistence_rates(pairs: int) -> dict[str, Any]:
    """The reference queue's claim+finish pairs per second on a fresh server of each persistence mode (the
    same ``pairs`` on each, one client, in the order of PERSISTENCE)."""
    rates: dict[str, Any] = {}
    for mode in PERSISTENCE:
        with PrivateRedis(mode) as server:
            queue = RedisLeaseQueue(server.url)
            try:
                queue.register_many([f"t{i}" for i in range(pairs)], 0.0)
                started = time.perf_counter()
                done = queue_raw.queue_pairs(queue, pairs)
                seconds = time.perf_counter() - started
            finally:
                queue.close()
        rates[mode] = {"pairs": done, "seconds": round(seconds, 3), "pairs_per_s": round(done / seconds, 1)}
    return rates
