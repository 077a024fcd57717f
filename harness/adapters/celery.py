"""Celery 5.7.0 with kombu 5.7.0's Redis transport (PyPI, BSD-3-Clause) behind the queue contract.

Names: ``takeover.adapters.celery:CeleryAdapter`` (Celery's default, ``task_acks_late = False``: the
message is acknowledged when the task is accepted, before it runs) and
``takeover.adapters.celery:CeleryAcksLateAdapter`` (``task_acks_late = True``: acknowledged after the
task's result is stored, the setting Celery's documentation gives for tasks that must survive a
worker's death). In both, kombu's ``visibility_timeout`` is the run's lease (its default is 3600 s), and
the restore sweep runs every lease (``unacked_restore_interval``, ``unacked_restore_throttle = 1``), as
kombu's documentation advises for a low visibility timeout. Install: ``pip install 'takeover[celery]'``.
Redis only (``--db redis``): the broker and the result backend are the run's database. File:line
references into the releases: docs/analyses/celery.md.

What a Celery worker does with the Redis transport, and what each contract call is:

* register: ``app.send_task(name, task_id=task)``: the message JSON pushed on the ``celery`` list.
  Celery has no dedupe: the producer checks first (``SET NX`` of a marker, then the publish).
* claim: the worker's timer runs ``QoS.restore_visible`` (every ``unacked_restore_interval``): messages
  in the ``unacked`` hash whose ``unacked_index`` score (the time of delivery, the *worker's* clock) is
  older than ``visibility_timeout`` are pushed back on the queue. Then a delivery: ``RPOP`` of the
  queue (``Channel._get``; the worker's ``BRPOP`` is the same pop) and ``QoS.append``: the message
  saved in ``unacked`` under its delivery tag, scored now (``Channel.basic_get(no_ack=False)``). Without
  acks_late the request then acknowledges it at once (``Request.on_accepted`` -> ``message.ack()``).
* finish: what the trace and the request do after the task returns or raises:
  ``backend.mark_as_done`` / ``mark_as_failure`` (the result backend ignores every update after a
  ``SUCCESS``), then, with acks_late, ``message.ack()``: ``ZREM``/``HDEL`` by delivery tag. No check of
  who holds the message; it returns nothing, so ``finish`` returns True. A finish for a generation that
  was never handed out answers False without a call: a worker's trace runs only for a message it
  received (the result backend itself would store a result for any task id).
* extend: none. Celery has no heartbeat for a task: a message's visibility is fixed at delivery.

What is *not* added: no fence. The generation is an observation (the adapter counts hand-outs: ``INCR``
after the delivery); a redelivered message keeps its delivery tag. Without acks_late Redis keeps
nothing about a task between its acknowledgement and its result: the adapter remembers the lease it
reported (``now + lease``) so that ``snapshot`` can show the task ``running`` until then, as the
contract's claim said; Celery itself never hands it out again.

The clock: kombu's Redis transport reads ``time()`` (``from time import time``) for the delivery score
and the restore's ceiling: ``kombu.transport.redis.time`` is the harness's ``now`` during each call.
"""

from __future__ import annotations

import math
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

from takeover.adapters.pins import require_library
from takeover.adapters.rediscommon import connect
from takeover.contract import OUTCOMES, Claim, SnapshotRow

PINNED = "5.7.0"
require_library("celery", PINNED)
require_library("kombu", "5.7.0")

import kombu.transport.redis as _kombu_redis  # noqa: E402 - after the check, so a missing library is one line
from celery import Celery, states  # noqa: E402

NAME = "takeover.adapters.celery:CeleryAdapter"
QUEUE = "celery"  # Celery's default queue (task_default_queue)
TASK = "takeover.task"
LEASE_KEY = "takeover:celery:lease"  # the run's lease: kombu's visibility_timeout, the same in every process
TASKS_KEY = "takeover:celery:tasks"
HANDOUTS = "takeover:celery:handouts:"  # + task id
TAGS_KEY = "takeover:celery:tags"  # task id -> the delivery tag of its message (for a finish from elsewhere)
NOMINAL_KEY = "takeover:celery:nominal"  # task id -> the lease the adapter reported (acks_late off)

# One consistent read: each task's result status, which delivery tags are unacked (and when they were
# delivered), which messages are queued, and the adapter's own records.
SNAPSHOT_LUA = """
local function task_of(raw)
  local ok, msg = pcall(cjson.decode, raw)
  if ok and type(msg) == 'table' and type(msg.headers) == 'table' then return msg.headers.id end
  return nil
end
local rows = {}
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local meta = redis.call('GET', ARGV[1] .. id)
  local status = ''
  if meta then
    local ok, m = pcall(cjson.decode, meta)
    if ok and type(m) == 'table' and m.status then status = m.status end
  end
  rows[id] = {id, status, '', '', redis.call('GET', ARGV[2] .. id) or '0', redis.call('HGET', KEYS[5], id) or ''}
end
local unacked = redis.call('HGETALL', KEYS[2])
for i = 1, #unacked, 2 do
  local ok, entry = pcall(cjson.decode, unacked[i + 1])
  local id = ok and type(entry) == 'table' and task_of(cjson.encode(entry[1])) or nil
  if id and rows[id] then
    local score = redis.call('ZSCORE', KEYS[3], unacked[i])
    if score then rows[id][3] = score end
  end
end
for _, raw in ipairs(redis.call('LRANGE', KEYS[4], 0, -1)) do
  local id = task_of(raw)
  if id and rows[id] then rows[id][4] = '1' end
end
local out = {}
for _, row in pairs(rows) do out[#out + 1] = row end
return out
"""


@contextmanager
def _kombu_time(now: float) -> Iterator[None]:
    """kombu's Redis transport sees the harness's clock (its module-level ``time``)."""
    saved = _kombu_redis.time
    _kombu_redis.time = lambda: now
    try:
        yield
    finally:
        _kombu_redis.time = saved


class CeleryAdapter:
    """``takeover.adapters.celery:CeleryAdapter`` — Celery's default: acknowledged before the task runs."""

    library = "celery"
    library_calls = {
        "register": "`app.send_task(name, task_id=task)`",
        "claim": "`QoS.restore_visible()` when its interval has passed, `Channel.basic_get(queue)` "
        "(`RPOP`, `QoS.append`: `unacked` under the delivery tag), then `message.ack()` (acks_late off)",
        "finish:done": "`backend.mark_as_done(task_id, None)`, then `message.ack()` with acks_late",
        "finish:uncertain": "`backend.mark_as_failure(task_id, exc)`, then `message.ack()` with acks_late",
    }
    library_states = {"pending": "queued", "running": "unacked", "done": "SUCCESS", "uncertain": "FAILURE"}

    databases = ("redis",)
    acks_late = False

    @classmethod
    def library_settings(cls, lease: float, heartbeat: float | None) -> list[str]:
        """``takeover tune``'s lease (production seconds) in Celery's settings: the visibility timeout, an
        int (Celery's Redis caveats), set in all three places they ask for, and the restore sweep as often."""
        vt = math.ceil(lease)
        options = f"{{'visibility_timeout': {vt}, 'unacked_restore_interval': {vt}, 'unacked_restore_throttle': 1}}"
        lines = [
            f"app.conf.broker_transport_options = {options}",
            f"app.conf.result_backend_transport_options = {{'visibility_timeout': {vt}}}; "
            f"app.conf.visibility_timeout = {vt}",
        ]
        if not cls.acks_late:
            lines.append("task_acks_late = True, or the visibility timeout protects a task only until its worker "
                         "accepts it (acknowledged before it runs)")  # fmt: skip
        if heartbeat is not None:
            lines.append("Celery cannot renew a task's visibility (no heartbeat): use the fixed-lease recommendation")
        return lines

    def __init__(self, db: str) -> None:
        self.url = db
        self.conn = connect(NAME, db)
        self.app = Celery("takeover", broker=db, backend=db, set_as_current=False)
        self.app.conf.task_acks_late = self.acks_late
        self._snapshot = self.conn.register_script(SNAPSHOT_LUA)
        self._consumer: Any = None  # kombu Connection for reading, made at the first claim (it needs the lease)
        self._channel: Any = None
        self._last_restore = float("-inf")
        self._held: dict[tuple[str, int], Any] = {}  # (task, generation) -> the kombu message

    # -- the contract ------------------------------------------------------------------------

    def register(self, task_id: str, now: float) -> None:
        self.register_many([task_id], now)

    def register_many(self, task_ids: list[str], now: float) -> None:
        for task in dict.fromkeys(task_ids):
            if not self.conn.sadd(TASKS_KEY, task):
                continue  # registered before: Celery would publish a second message
            self.app.send_task(TASK, task_id=task)

    def claim(self, worker: str, now: float, lease: float) -> Claim | None:
        channel = self._channel_for(lease)
        with _kombu_time(now):
            if now - self._last_restore >= channel.unacked_restore_interval:
                self._last_restore = now
                channel.qos.restore_visible(
                    num=channel.unacked_restore_limit, interval=channel.unacked_restore_throttle
                )
            message = channel.basic_get(QUEUE, no_ack=False)
        if message is None:
            return None
        task = str(message.headers["id"])
        generation = int(self.conn.incr(HANDOUTS + task))
        self.conn.hset(TAGS_KEY, task, message.delivery_tag)
        if self.acks_late:
            delivered = self.conn.zscore(channel.unacked_index_key, message.delivery_tag)
            until = (float(delivered) if delivered is not None else now) + lease
        else:
            message.ack()  # Request.on_accepted: acknowledged before the task runs
            until = now + lease
            self.conn.hset(NOMINAL_KEY, task, repr(until))
        self._held[(task, generation)] = message
        return task, generation, until

    def finish(self, task_id: str, generation: int, outcome: str, now: float) -> bool:
        """The trace stores the result, then (acks_late) the request acknowledges: nothing is checked."""
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, got {outcome!r}")
        if not 1 <= generation <= int(cast(bytes | None, self.conn.get(HANDOUTS + task_id)) or 0):
            return False  # never handed out: no worker received it, so no trace would store a result
        backend = self.app.backend
        if outcome == "done":
            backend.mark_as_done(task_id, None)
        else:
            try:
                raise RuntimeError("takeover: the task's outcome is uncertain")
            except RuntimeError as exc:
                backend.mark_as_failure(task_id, exc, traceback=traceback.format_exc())
        if self.acks_late:
            message = self._held.pop((task_id, generation), None)
            with _kombu_time(now):
                if message is not None:
                    message.ack()
                else:  # a process that did not receive it (a scenario's reopened worker): ack by its tag
                    tag = cast(bytes | None, self.conn.hget(TAGS_KEY, task_id))
                    if tag is not None:
                        self._channel_for(self._stored_lease()).qos.ack(tag.decode())
        return True

    def snapshot(self) -> list[SnapshotRow]:
        lease = self._stored_lease(default=None)
        keys = [TASKS_KEY, "unacked", "unacked_index", QUEUE, NOMINAL_KEY]
        rows = cast(list[list[bytes]], self._snapshot(keys=keys, args=["celery-task-meta-", HANDOUTS]))
        out: list[SnapshotRow] = []
        for raw in rows:
            task, status, delivered, queued, handouts, nominal = (b.decode() for b in raw)
            generation = int(handouts)
            if status == states.SUCCESS:
                out.append((task, "done", generation, None))
            elif status == states.FAILURE:
                out.append((task, "uncertain", generation, None))
            elif delivered and lease is not None:
                out.append((task, "running", generation, float(delivered) + lease))
            elif queued or generation == 0:
                out.append((task, "pending", generation, None))
            else:  # handed out, acknowledged (or its unacked entry deleted), no result: nobody will run it
                out.append((task, "running", generation, float(nominal) if nominal else None))
        out.sort()
        return out

    def close(self) -> None:
        """A warm shutdown: kombu's channel close restores this channel's unacked messages."""
        if self._consumer is not None:
            self._consumer.release()
        self.app.close()
        self.conn.close()

    # -- helpers -----------------------------------------------------------------------------

    def _stored_lease(self, default: float | None = 30.0) -> float:
        stored = self.conn.get(LEASE_KEY)
        return float(stored) if stored is not None else cast(float, default)

    def _channel_for(self, lease: float) -> Any:
        """The consuming channel, with the run's lease as ``visibility_timeout`` (the first claim of the
        run stores it; every process then uses that one)."""
        if self._channel is None:
            self.conn.set(LEASE_KEY, repr(lease), nx=True)
            lease = self._stored_lease()
            self.app.conf.broker_transport_options = {
                "visibility_timeout": lease,
                "unacked_restore_interval": lease,
                "unacked_restore_throttle": 1,
            }
            self._consumer = self.app.connection_for_read()
            self._channel = self._consumer.default_channel
        return self._channel


class CeleryAcksLateAdapter(CeleryAdapter):
    """``takeover.adapters.celery:CeleryAcksLateAdapter`` — ``task_acks_late = True``."""

    acks_late = True
