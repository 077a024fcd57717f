"""Huey 3.5.4 (PyPI, MIT) with its Redis storage behind the queue contract.

Name: ``takeover.adapters.huey:HueyAdapter``. Install: ``pip install 'takeover[huey]'``. Redis only
(``--db redis``). File:line references into the release: docs/analyses/huey.md.

Huey has no lease: a consumer pops a task off a Redis list and nothing in Redis records that it is running
("Huey does not guarantee at-least-once delivery of messages, and does not do acknowledgement of completed
tasks", its consumer documentation). What each contract call is:

* register: ``huey.enqueue(task)`` (``LPUSH`` of the pickled task), with the task id as Huey's task id.
  Huey has no dedupe: the producer checks first (``SADD`` of the id to the adapter's set, then enqueue).
* claim: ``huey.dequeue()``: ``RPOP`` (``RedisHuey(blocking=False)``; the consumer's ``BRPOP`` with a
  one-second timeout is the same pop). The task is gone from Redis.
* finish: what ``Huey._execute`` stores after the task returns or raises: ``put_result(task.id, value)``
  (``HSET`` into the results hash), or for a failure with no retries left ``put_result(task.id,
  Error(...))``. By task id, no check; it returns nothing, so ``finish`` returns True. A finish for a
  generation never handed out answers False without a call (a consumer only executes what it popped).
* no extend: Huey has nothing to extend.

What is *not* added: nothing fences anything. Redis keeps nothing about a popped task until its result,
so the adapter remembers the hand-outs (``HINCRBY``) and the lease it reported (``now + lease``), for
``snapshot`` to show the task ``running`` until then as the claim said; Huey never hands it out again.
No clock: nothing in Huey's pop or result store reads the time.
"""

from __future__ import annotations

import traceback
from typing import Any, cast

from takeover.adapters.pins import require_library
from takeover.adapters.rediscommon import connect
from takeover.contract import OUTCOMES, Claim, SnapshotRow

PINNED = "3.5.4"
require_library("huey", PINNED)

from huey import RedisHuey  # noqa: E402
from huey.api import Error  # noqa: E402

NAME = "takeover.adapters.huey:HueyAdapter"
HUEY_NAME = "takeover"
TASKS_KEY = "takeover:huey:tasks"
HANDOUTS_KEY = "takeover:huey:handouts"  # hash: task id -> hand-outs counted by the adapter
NOMINAL_KEY = "takeover:huey:nominal"  # hash: task id -> the lease the adapter reported at its last hand-out


class HueyAdapter:
    """``takeover.adapters.huey:HueyAdapter`` — Huey's Redis storage as its consumer uses it."""

    library = "huey"
    library_calls = {
        "register": "`huey.enqueue(task)`",
        "claim": "`huey.dequeue()` (`RPOP`)",
        "finish:done": "`huey.put_result(task.id, value)`",
        "finish:uncertain": "`huey.put_result(task.id, Error(...))`",
    }
    library_states = {"pending": "queued", "running": "popped", "done": "result", "uncertain": "error result"}

    databases = ("redis",)

    def __init__(self, db: str) -> None:
        self.conn = connect(NAME, db)
        self.huey = RedisHuey(HUEY_NAME, url=db, blocking=False)
        self.perform = self.huey.task(name="takeover.task")(_perform)
        self.storage: Any = self.huey.storage

    # -- the contract ------------------------------------------------------------------------

    def register(self, task_id: str, now: float) -> None:
        self.register_many([task_id], now)

    def register_many(self, task_ids: list[str], now: float) -> None:
        for task in dict.fromkeys(task_ids):
            if not self.conn.sadd(TASKS_KEY, task):
                continue  # registered before: Huey would enqueue a second task
            self.huey.enqueue(self.perform.task_class((), {}, id=task))

    def claim(self, worker: str, now: float, lease: float) -> Claim | None:
        task = self.huey.dequeue()
        if task is None:
            return None
        generation = int(self.conn.hincrby(HANDOUTS_KEY, task.id, 1))
        until = float(now + lease)
        self.conn.hset(NOMINAL_KEY, task.id, repr(until))
        return str(task.id), generation, until

    def finish(self, task_id: str, generation: int, outcome: str, now: float) -> bool:
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, got {outcome!r}")
        if not 1 <= generation <= int(cast(bytes | None, self.conn.hget(HANDOUTS_KEY, task_id)) or 0):
            return False  # never handed out: no consumer popped it, so none would store a result
        if outcome == "done":
            self.huey.put_result(task_id, True)
        else:
            task = self.perform.task_class((), {}, id=task_id)
            try:
                raise RuntimeError("takeover: the task's outcome is uncertain")
            except RuntimeError as exc:
                error = Error(self.huey.build_error_result(task, exc))
                traceback.clear_frames(exc.__traceback__)
            self.huey.put_result(task_id, error)
        return True

    def snapshot(self) -> list[SnapshotRow]:
        """One MULTI/EXEC: the registered ids, the queue, the results and the adapter's records together."""
        with self.conn.pipeline(transaction=True) as pipe:
            pipe.smembers(TASKS_KEY)
            pipe.lrange(self.storage.queue_key, 0, -1)
            pipe.hgetall(self.storage.result_key)
            pipe.hgetall(HANDOUTS_KEY)
            pipe.hgetall(NOMINAL_KEY)
            members, queued_raw, results, handouts, nominal = pipe.execute()
        queued = {str(self.huey.deserialize_task(raw).id) for raw in queued_raw}
        out: list[SnapshotRow] = []
        for raw_id in members:
            task = raw_id.decode()
            generation = int(handouts.get(raw_id, 0))
            result = results.get(raw_id)
            if result is not None:
                value = self.huey.serializer.deserialize(result)
                out.append((task, "uncertain" if isinstance(value, Error) else "done", generation, None))
            elif task in queued or generation == 0:
                out.append((task, "pending", generation, None))
            else:  # popped, no result: Huey holds it nowhere, and never hands it out again
                until = nominal.get(raw_id)
                out.append((task, "running", generation, float(until) if until is not None else None))
        out.sort()
        return out

    def close(self) -> None:
        self.conn.close()


def _perform() -> None:
    """The task's function as Huey registers it; never called (takeover's worker does the task's work)."""
