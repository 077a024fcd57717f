"""taskiq-redis 1.2.4 (PyPI, MIT; with taskiq 0.13.0): ``RedisStreamBroker`` behind the queue contract.

Names: ``takeover.adapters.taskiq_redis:TaskiqStreamAdapter`` (taskiq's default, ``ack_type=when_saved``:
the message is acknowledged after the task's result is stored) and
``takeover.adapters.taskiq_redis:TaskiqAckOnReceiveAdapter`` (``ack_type=when_received``: acknowledged
before the task runs). Install: ``pip install 'takeover[taskiq-redis]'``. Redis only (``--db redis``).
File:line references into the release: docs/analyses/taskiq_redis.md. taskiq-redis 1.2.2, the last
release before the fix of taskiq-redis #123 (#126), is accepted too, to show the difference.

What taskiq's worker (``taskiq worker``: ``Receiver.prefetcher`` iterating ``broker.listen()``, then
``Receiver.callback`` per message) does, and what each contract call is:

* register: ``broker.kick(broker.formatter.dumps(TaskiqMessage(task_id=task, ...)))``: ``XADD`` of the
  message to the stream. taskiq has no dedupe: the producer checks first (``SADD`` of the id).
* claim: one turn of ``RedisStreamBroker.listen()``: ``XREADGROUP`` of new messages, then (a lock
  around it) ``XAUTOCLAIM`` of pending entries idle for at least ``idle_timeout``, up to its next
  ``XREADGROUP``. The first message the turn yields is the hand-out; a second one (new message, then a
  reclaimed one) is kept as the receiver's prefetch and handed out by the worker's next claim, with the
  lease Redis gives it: from the fetch. ``xread_count`` and ``unacknowledged_batch_size`` are 1 (taskiq's
  defaults, 100, prefetch up to 100 messages per worker, each one's idle time running meanwhile).
* finish: what ``Receiver.callback`` does after the task returns (done) or raises (uncertain):
  ``result_backend.set_result(task_id, TaskiqResult)`` (``RedisAsyncResultBackend``), then, with
  ``when_saved``, the message's ``ack()``: ``XACK`` by message id. Nothing checks who holds the message:
  both return nothing, so ``finish`` returns True. A finish for a generation never handed out answers
  False without a call (a worker only runs a message it received).
* no extend: taskiq has no heartbeat; a message's idle time restarts only when it is delivered again.

The generation is an observation: the adapter counts hand-outs (``HINCRBY``); Redis's own delivery
counter of the pending entry is gone once the entry is acknowledged.

The clock. The lease is ``idle_timeout`` (ms, default 600 000), compared by the Redis *server* with the
time since the entry's last delivery: taskiq reads no clock. The adapter sets ``idle_timeout`` to the
contract's lease at each claim. In stress runs (``now`` is ``time.time()``) the server's clock is the
lease's clock, as in production, and the adapter touches nothing. On the scenarios' logical clock
(t = 0, 1, 31, ...) no real time passes, so before each claim the adapter sets every pending entry's
idle time to the logical time since its hand-out (``XCLAIM ... IDLE ms JUSTID`` to its own consumer,
one Lua script: the owner and the delivery count unchanged). That is the only write outside taskiq's.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncGenerator
from typing import Any, cast

from takeover.adapters.pins import require_library
from takeover.adapters.rediscommon import connect
from takeover.contract import OUTCOMES, Claim, SnapshotRow

PINNED = "1.2.4"
BEFORE_FIX = "1.2.2"  # the last release before taskiq-redis #126 (the fix of #123): run only to show the difference
VERSION = require_library("taskiq-redis", (PINNED, BEFORE_FIX), module="taskiq_redis")
# taskiq 0.12.6 goes with 1.2.2 only (1.2.2 imports taskiq.compat.model_dump, gone in 0.13)
TASKIQ = require_library("taskiq", ("0.13.0", "0.12.6"), module="taskiq_redis", extra="taskiq-redis")

import redis  # noqa: E402 - after the check, so a missing library is one line
import redis.asyncio  # noqa: E402
from taskiq import AckableMessage, TaskiqMessage, TaskiqResult  # noqa: E402
from taskiq_redis import RedisAsyncResultBackend, RedisStreamBroker  # noqa: E402

NAME = "takeover.adapters.taskiq_redis:TaskiqStreamAdapter"
STREAM = "takeover"  # the broker's queue_name: the stream's key
GROUP = "taskiq"  # taskiq's default consumer group
TASK_NAME = "takeover.task"
RESULTS = "takeover:taskiq:result"  # the result backend's prefix_str: results at RESULTS:task_id
TASKS_KEY = "takeover:taskiq:tasks"  # the registered task ids
HANDOUTS_KEY = "takeover:taskiq:handouts"  # hash: task id -> hand-outs counted by the adapter
HANDED_KEY = "takeover:taskiq:handed"  # hash: message id -> the lease's end at its last hand-out (now + lease)
LOGICAL = 3600.0  # a `now` this far from time.time() is the scenarios' logical clock

# The logical clock: every pending entry's idle time set to the logical time since its hand-out
# (ARGV[1] = now in ms, ARGV[3] the lease: HANDED_KEY holds each hand-out's lease end); the owner and the
# delivery count are kept (XCLAIM to the owner, JUSTID). Every worker of a scenario asks for the same lease.
IDLE_LUA = """
local pending = redis.call('XPENDING', KEYS[1], ARGV[2], '-', '+', 1000000)
for _, entry in ipairs(pending) do
  local handed = redis.call('HGET', KEYS[2], entry[1])
  if handed then
    local idle = math.max(0, math.floor(tonumber(ARGV[1]) - (tonumber(handed) - tonumber(ARGV[3])) * 1000))
    redis.call('XCLAIM', KEYS[1], ARGV[2], entry[2], 0, entry[1], 'IDLE', idle, 'JUSTID')
  end
end
return #pending
"""

# One consistent read: the stream's messages, the pending entries, and the adapter's records.
SNAPSHOT_LUA = """
local ids = redis.call('SMEMBERS', KEYS[1])
local results = {}
for _, id in ipairs(ids) do
  results[#results + 1] = redis.call('GET', ARGV[1] .. id) or ''
end
local stream = {}
if redis.call('EXISTS', KEYS[2]) == 1 then
  stream = redis.call('XRANGE', KEYS[2], '-', '+')
end
local pending = {}
if redis.call('EXISTS', KEYS[2]) == 1 then
  pending = redis.call('XPENDING', KEYS[2], ARGV[2], '-', '+', 1000000)
end
return {ids, results, stream, pending, redis.call('HGETALL', KEYS[3]), redis.call('HGETALL', KEYS[4])}
"""


class _TurnOver(Exception):
    """Raised into ``listen()`` at its second ``XREADGROUP``: one turn found nothing to hand out."""


def _perform() -> None:
    """The task's function as taskiq registers it; never called (takeover's worker does the work)."""


class TaskiqStreamAdapter:
    """``takeover.adapters.taskiq_redis:TaskiqStreamAdapter`` — taskiq's default ``ack_type=when_saved``."""

    library = "taskiq-redis"
    library_calls = {
        "register": "`broker.kick(broker.formatter.dumps(TaskiqMessage(...)))` (`XADD`)",
        "claim": "one turn of `RedisStreamBroker.listen()`: `XREADGROUP`, then `XAUTOCLAIM` (min idle `idle_timeout`)",
        "finish:done": "`result_backend.set_result(task_id, TaskiqResult(is_err=False))`, then `ack()` (`XACK`)",
        "finish:uncertain": "`result_backend.set_result(task_id, TaskiqResult(is_err=True))`, then `ack()` (`XACK`)",
    }
    library_states = {"pending": "in the stream", "running": "pending entry", "done": "result", "uncertain": "error"}

    databases = ("redis",)
    ack_on_receive = False  # taskiq's default ack_type is when_saved (taskiq/cli/worker/args.py:53)

    @staticmethod
    def library_settings(lease: float, heartbeat: float | None) -> list[str]:
        """``takeover tune``'s lease (production seconds) in taskiq-redis's settings: the lease is
        ``idle_timeout`` (ms), the idle time after which another worker's ``XAUTOCLAIM`` takes a message."""
        ms = max(1, math.ceil(lease * 1000))
        lines = [
            f"RedisStreamBroker(idle_timeout={ms}): a message unacknowledged for {lease:g} s is reclaimed "
            "by another worker (XAUTOCLAIM); nothing renews it while its task runs",
            "keep ack_type=when_saved (taskiq worker --ack-type when_saved, the default): when_received "
            "loses a dead worker's message",
            "small xread_count and unacknowledged_batch_size: a prefetched message's idle time runs while it waits",
        ]
        if heartbeat is not None:
            lines.append(f"the recommended heartbeat (every {heartbeat:g} s) has no counterpart: taskiq-redis "
                         "has no heartbeat, so idle_timeout must exceed your longest task")  # fmt: skip
        return lines

    def __init__(self, db: str) -> None:
        self.url = db
        self.conn = connect(NAME, db)
        self.loop = asyncio.new_event_loop()
        self.results: RedisAsyncResultBackend[Any] = RedisAsyncResultBackend(db, prefix_str=RESULTS)
        self._idle = self.conn.register_script(IDLE_LUA)
        self._snapshot = self.conn.register_script(SNAPSHOT_LUA)
        self._brokers: dict[str, RedisStreamBroker] = {}  # contract worker name -> its broker (a consumer)
        self._held: dict[tuple[str, int], AckableMessage] = {}
        # worker -> messages a turn fetched past the one handed out, with the harness's now at the fetch:
        # the receiver's prefetch (they are this consumer's pending entries; their idle time runs)
        self._buffers: dict[str, list[tuple[AckableMessage, float]]] = {}
        self._producer = self._broker("producer")

    # -- the contract ------------------------------------------------------------------------

    def register(self, task_id: str, now: float) -> None:
        self.register_many([task_id], now)

    def register_many(self, task_ids: list[str], now: float) -> None:
        for task in dict.fromkeys(task_ids):
            if not self.conn.sadd(TASKS_KEY, task):
                continue  # registered before: taskiq would add a second message
            message = TaskiqMessage(task_id=task, task_name=TASK_NAME, labels={}, args=[], kwargs={})
            self._run(self._producer.kick(self._producer.formatter.dumps(message)))

    def claim(self, worker: str, now: float, lease: float) -> Claim | None:
        broker = self._broker(worker)
        broker.idle_timeout = max(1, round(lease * 1000))
        buffered = self._buffers.setdefault(worker, [])
        if not buffered:  # the receiver asks listen() for more only when it has nothing prefetched
            if abs(now - time.time()) > LOGICAL:
                self._idle(keys=[STREAM, HANDED_KEY], args=[repr(now * 1000), GROUP, repr(lease)])
            buffered.extend((message, now) for message in self._run(self._one_turn(broker)))
        if not buffered:
            return None
        message, fetched = buffered.pop(0)
        task = broker.formatter.loads(message.data).task_id
        generation = int(self.conn.hincrby(HANDOUTS_KEY, task, 1))
        until = float(fetched + lease)  # Redis counts the idle time from the fetch, not from this hand-out
        self.conn.hset(HANDED_KEY, _message_id(message), repr(until))
        if self.ack_on_receive:
            self._run(message.ack())  # Receiver.callback: before the task runs (when_received)
        self._held[(task, generation)] = message
        return task, generation, until

    def finish(self, task_id: str, generation: int, outcome: str, now: float) -> bool:
        """What ``Receiver.callback`` does after the task: its result stored, then (when_saved) the ack."""
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, got {outcome!r}")
        if not 1 <= generation <= int(cast(bytes | None, self.conn.hget(HANDOUTS_KEY, task_id)) or 0):
            return False  # never handed out: no worker received it, so none would run it
        held = self._held.pop((task_id, generation), None)
        failed = outcome == "uncertain"
        result: TaskiqResult[Any] = TaskiqResult(
            is_err=failed, return_value=None, execution_time=0.0, error=RuntimeError("uncertain") if failed else None
        )
        self._run(self.results.set_result(task_id, result))
        if held is not None and not self.ack_on_receive:
            self._run(held.ack())
        elif held is None and not self.ack_on_receive:
            self._ack_by_task(task_id)  # a reopened worker: its ack closure is gone; the same XACK by id
        return True

    def snapshot(self) -> list[SnapshotRow]:
        ids, results, stream, pending, flat_handouts, flat_handed = self._snapshot(
            keys=[TASKS_KEY, STREAM, HANDOUTS_KEY, HANDED_KEY], args=[RESULTS + ":", GROUP]
        )
        handouts = dict(zip(flat_handouts[::2], flat_handouts[1::2], strict=True))
        handed = dict(zip(flat_handed[::2], flat_handed[1::2], strict=True))
        formatter = self._producer.formatter
        task_of = {mid: formatter.loads(fields[1]).task_id for mid, fields in stream}
        running: dict[str, float | None] = {}
        for entry in pending:
            task = task_of.get(entry[0])
            if task is not None:
                until = handed.get(entry[0])
                running[task] = float(until) if until is not None else None
        handed_tasks = {task_of[m]: float(until) for m, until in handed.items() if m in task_of}
        out: list[SnapshotRow] = []
        for raw_id, raw_result in zip(ids, results, strict=True):
            task = raw_id.decode()
            generation = int(handouts.get(raw_id, 0))
            if raw_result:
                failed = bool(self.results.serializer.loadb(raw_result)["is_err"])
                out.append((task, "uncertain" if failed else "done", generation, None))
            elif task in running:
                out.append((task, "running", generation, running[task]))
            elif self.ack_on_receive and generation > 0:  # acked on receipt: taskiq holds it nowhere
                out.append((task, "running", generation, handed_tasks.get(task)))
            else:
                out.append((task, "pending", generation, None))
        out.sort()
        return out

    def close(self) -> None:
        try:
            for broker in self._brokers.values():
                self._run(broker.shutdown())
            self._run(self.results.shutdown())
        finally:
            self.loop.close()
            self.conn.close()

    # -- helpers -----------------------------------------------------------------------------

    def _run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def _broker(self, worker: str) -> RedisStreamBroker:
        """The broker of a contract worker: one consumer of the group, named after the worker."""
        broker = self._brokers.get(worker)
        if broker is None:
            broker = RedisStreamBroker(
                self.url,
                queue_name=STREAM,
                consumer_group_name=GROUP,
                consumer_name=f"takeover-{worker}",
                xread_block=1,  # ms: a claim does not wait for a message (taskiq's default waits 2 s)
                xread_count=1,
                unacknowledged_batch_size=1,
            ).with_result_backend(self.results)
            broker.register_task(_perform, task_name=TASK_NAME)
            self._run(broker.startup())  # creates the consumer group (BUSYGROUP ignored)
            self._brokers[worker] = broker
        return broker

    async def _one_turn(self, broker: RedisStreamBroker) -> list[AckableMessage]:
        """Every message one turn of ``listen()`` yields: the new one ``XREADGROUP`` read, then the one
        ``XAUTOCLAIM`` took (``count`` 1 each); the turn ends at its next ``XREADGROUP``."""
        real = redis.asyncio.Redis.xreadgroup
        calls = 0

        async def counted(conn: Any, *args: Any, **kwargs: Any) -> Any:
            nonlocal calls
            calls += 1
            if calls > 1:
                raise _TurnOver
            return await real(conn, *args, **kwargs)

        listen: AsyncGenerator[AckableMessage, None] = broker.listen()
        messages: list[AckableMessage] = []
        redis.asyncio.Redis.xreadgroup = counted  # type: ignore[method-assign,assignment]
        try:
            async for message in listen:
                messages.append(message)
        except _TurnOver:
            pass
        finally:
            redis.asyncio.Redis.xreadgroup = real  # type: ignore[method-assign]
            await listen.aclose()
        return messages

    def _ack_by_task(self, task_id: str) -> None:
        entries = cast(list[tuple[bytes, dict[bytes, bytes]]], self.conn.xrange(STREAM))
        for mid, fields in entries:
            if self._producer.formatter.loads(fields[b"data"]).task_id == task_id:
                self.conn.xack(STREAM, GROUP, mid)


def _message_id(message: AckableMessage) -> str:
    """The stream id the message's ack closure holds (``_ack_generator(id=...)``, redis_broker.py)."""
    closure = message.ack.__closure__ or ()
    names = message.ack.__code__.co_freevars
    value = dict(zip(names, (c.cell_contents for c in closure), strict=True))["id"]
    return value.decode() if isinstance(value, bytes) else str(value)


class TaskiqAckOnReceiveAdapter(TaskiqStreamAdapter):
    """``takeover.adapters.taskiq_redis:TaskiqAckOnReceiveAdapter`` — ``ack_type=when_received``: the
    message is acknowledged before the task runs, so a worker's death loses it."""

    ack_on_receive = True
