"""Dramatiq 2.2.1 (PyPI, LGPL-3.0) with its ``RedisBroker`` behind the queue contract.

Names: ``takeover.adapters.dramatiq:DramatiqAdapter`` (Dramatiq's default ``maintenance_chance=1000``:
one command in a thousand runs the maintenance that requeues a dead worker's messages) and
``takeover.adapters.dramatiq:DramatiqMaintainAlwaysAdapter`` (``maintenance_chance=1000000``: every
command runs it, so a dead worker's messages come back at the first command after ``heartbeat_timeout``).
In both, ``heartbeat_timeout`` (ms, default 60 000) is the run's lease. Install: ``pip install
'takeover[dramatiq]'``. Redis only (``--db redis``). File:line references into the release:
docs/analyses/dramatiq.md.

Every Redis command of the broker is one Lua script, ``dispatch.lua``: it first records the calling
broker's heartbeat (``ZADD __heartbeats__ <client ms> <broker_id>``), then, with the chance above, the
maintenance of *that command's queue* (a dead worker's ack set for it pushed back on the queue), then
the command. A broker is one worker process (``broker_id``, a uuid4 per ``RedisBroker``); here each
contract worker name is one, so a scenario's "worker exits, connection reopened" is a new worker, as a
restarted Dramatiq process is. What each contract call is:

* register: ``broker.enqueue(Message(..., message_id=task))`` (``HSET`` of the data, ``RPUSH`` of a fresh
  ``redis_message_id``), from a producer's broker of its own. Dramatiq has no dedupe: the producer
  checks first (``SADD`` of the id), and records the ``redis_message_id`` in the same transaction.
* claim: a turn of ``_RedisConsumer.__next__`` with one free prefetch slot: ``do_fetch(queue, 1)``
  (``LPOP``, ``SADD`` to the worker's ack set), ``Message.decode``, ``MessageProxy``; the consumer's
  idle back-off sleep is left out.
* extend: what sends Dramatiq's heartbeat while an actor runs: the worker's delay-queue consumer,
  whose prefetch is never full, fetching (``do_fetch(queue.DQ, 1000)``, nothing there) at least every
  ``worker_timeout``. It renews every message the worker holds, and cannot fail or say anything about
  one: the adapter answers the heartbeat's time plus ``heartbeat_timeout``, as Dramatiq's worker goes on.
* finish: ``post_process_message``: ``consumer.ack(message)`` (done) or, for a message the Retries
  middleware failed (an exception with no retries left), ``message.fail()`` then ``consumer.nack``
  (uncertain: the dead-letter queue). Both ``SREM`` the message from the worker's *own* ack set and act
  only if it was there; the script returns nothing either way. ``finish`` answers whether it acted,
  read in the same ``MULTI`` as the script (``SISMEMBER`` before it): an observation, Dramatiq's
  worker is not told. A finish for a hand-out this object never made answers False without a call: a
  worker acks only messages its own consumer fetched.

The generation is an observation: the adapter counts hand-outs (``HINCRBY`` right after the fetch;
Dramatiq has no delivery counter).

The clock. The broker reads ``current_millis()`` (client time, ``int(time() * 1000)``) for every
heartbeat and for the maintenance's "dead" threshold: ``dramatiq.brokers.redis.current_millis`` is the
harness's ``now`` during each call. Maintenance draws ``random.randint(1, 1000000)`` from the global
``random`` module: during each call that name is a ``random.Random`` of the adapter's, seeded by the
run's ``--seed``, the worker's name and its incarnation (``_Worker``; the chance itself is Dramatiq's).
"""

from __future__ import annotations

import json
import math
import os
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

from takeover._internal.lifeline import RUN_ENV  # set in every process of a stress run
from takeover.adapters.pins import require_library
from takeover.adapters.rediscommon import REDIS_URLS, connect
from takeover.contract import OUTCOMES, Claim, SnapshotRow

PINNED = "2.2.1"
require_library("dramatiq", PINNED)

import dramatiq.brokers.redis as _dramatiq_redis  # noqa: E402 - after the check, so a missing library is one line
import redis  # noqa: E402
from dramatiq.broker import MessageProxy  # noqa: E402
from dramatiq.brokers.redis import RedisBroker  # noqa: E402
from dramatiq.common import dq_name  # noqa: E402
from dramatiq.message import Message  # noqa: E402

NAME = "takeover.adapters.dramatiq:DramatiqAdapter"
NAMESPACE = "dramatiq"  # RedisBroker's default namespace: every key below starts with it
QUEUE = "takeover"
ACTOR = "takeover_task"  # stored by name; takeover's workers do the work, never a Dramatiq actor
DEFAULT_CHANCE = _dramatiq_redis.DEFAULT_MAINTENANCE_CHANCE  # 1000 of MAINTENANCE_SCALE (a million)
DELAY_PREFETCH = 1000  # Worker.delay_prefetch with one worker thread: 1000 x threads
TASKS_KEY = "takeover:dramatiq:tasks"  # the registered task ids
MIDS_KEY = "takeover:dramatiq:mids"  # hash: task id -> its message's redis_message_id
HANDOUTS_KEY = "takeover:dramatiq:handouts"  # hash: task id -> hand-outs counted by the adapter
LEASE_KEY = "takeover:dramatiq:lease"  # the run's heartbeat_timeout in ms, the same in every process
INCARNATIONS = "takeover:dramatiq:incarnation:"  # + worker name: how many of its brokers were made
ACKS_PREFIX = f"{NAMESPACE}:__acks__."  # + broker_id + "." + queue: a worker's fetched, unacked messages
ACKS_SUFFIX = f".{QUEUE}"
HEARTBEATS = f"{NAMESPACE}:__heartbeats__"
QUEUE_KEY = f"{NAMESPACE}:{QUEUE}"
MSGS_KEY = f"{QUEUE_KEY}.msgs"
DEAD_MSGS_KEY = f"{QUEUE_KEY}.XQ.msgs"

# One consistent read: for each task its message's place (the queue, an ack set and whose, the
# messages hash, the dead-letter hash), the holder's heartbeat, and the adapter's records.
SNAPSHOT_LUA = """
local queued = {}
for _, m in ipairs(redis.call('LRANGE', KEYS[4], 0, -1)) do queued[m] = (queued[m] or 0) + 1 end
local holders, held_by = {}, {}
for _, key in ipairs(redis.call('KEYS', ARGV[1] .. '*')) do
  if string.sub(key, -#ARGV[2]) == ARGV[2] then
    local worker = string.sub(key, #ARGV[1] + 1, -#ARGV[2] - 1)
    for _, m in ipairs(redis.call('SMEMBERS', key)) do
      holders[m] = (holders[m] or 0) + 1
      held_by[m] = worker
    end
  end
end
local rows = {}
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local mid = redis.call('HGET', KEYS[2], id)
  local handouts = redis.call('HGET', KEYS[3], id) or '0'
  if mid then
    local beat = ''
    if held_by[mid] then beat = redis.call('ZSCORE', KEYS[7], held_by[mid]) or '' end
    rows[#rows + 1] = {id, handouts, redis.call('HEXISTS', KEYS[5], mid), redis.call('HEXISTS', KEYS[6], mid),
                       queued[mid] or 0, holders[mid] or 0, beat}
  end
end
return rows
"""


class _Worker:
    """One Dramatiq worker process: its broker (``broker_id``), its consumer of the queue, and the
    random source its maintenance draws from: seeded by the run's ``--seed``, the worker's name and its
    incarnation (a counter in Redis), so that a scenario replays alike, each seed of a stress run draws
    otherwise, and a restarted worker does not repeat its predecessor's draws (a restarted Dramatiq
    process would not)."""

    def __init__(self, name: str, conn: redis.Redis, chance: int) -> None:
        self.broker = RedisBroker(client=conn, middleware=[], maintenance_chance=chance)
        self.consumer: Any = self.broker.consume(QUEUE, prefetch=1, timeout=0)  # a _RedisConsumer
        incarnation = int(conn.incr(INCARNATIONS + name))
        self.random = random.Random(f"takeover-dramatiq-{_run_seed()}-{name}-{incarnation}")


def _run_seed() -> str:
    """The run's ``--seed`` (its config.json, in the run folder every process of a run is told of), or
    nothing outside a stress run."""
    run_dir = os.environ.get(RUN_ENV)
    if not run_dir:
        return ""
    try:
        return str(json.loads((Path(run_dir) / "config.json").read_text())["seed"])
    except (OSError, ValueError, KeyError, TypeError):
        return ""


class DramatiqAdapter:
    """``takeover.adapters.dramatiq:DramatiqAdapter`` — Dramatiq's ``RedisBroker`` with its defaults."""

    library = "dramatiq"
    library_calls = {
        "register": "`broker.enqueue(Message(queue_name, actor_name, (), {}, {}, message_id=task))`",
        "claim": "`broker.do_fetch(queue, 1)` (`_RedisConsumer.__next__`: `LPOP`, `SADD` to the worker's ack set)",
        "extend": "`broker.do_fetch(queue.DQ, 1000)` (the delay-queue consumer's poll: the worker's heartbeat)",
        "finish:done": "`consumer.ack(message)` (`SREM` from the worker's ack set, then `HDEL` of the message)",
        "finish:uncertain": "`message.fail()`, `consumer.nack(message)` (`SREM`, then to the dead-letter queue)",
    }
    library_states = {"pending": "queued", "running": "in an ack set", "done": "acked", "uncertain": "dead-lettered"}

    databases = ("redis",)
    maintenance_chance = DEFAULT_CHANCE

    @classmethod
    def library_settings(cls, lease: float, heartbeat: float | None) -> list[str]:
        """``takeover tune``'s lease (production seconds) in Dramatiq's settings: the lease is the broker's
        ``heartbeat_timeout`` (ms); the heartbeat is every command of the worker's consumers."""
        ms = max(1, math.ceil(lease * 1000))
        lines = [
            f"RedisBroker(heartbeat_timeout={ms}): a worker that sent no command for {lease:g} s is dead, and the "
            "next maintenance on a queue pushes the messages it fetched from that queue back onto it",
        ]
        if cls.maintenance_chance < _dramatiq_redis.MAINTENANCE_SCALE:
            lines.append(
                f"RedisBroker(maintenance_chance=1000000): the default ({cls.maintenance_chance} in a million) "
                "runs that maintenance on about one command in "
                f"{_dramatiq_redis.MAINTENANCE_SCALE // cls.maintenance_chance}: a dead worker's messages wait "
                "that many commands on their queue after heartbeat_timeout"
            )
        beat = "the idle poll of its delay-queue consumer, at most worker_timeout apart"
        if heartbeat is not None:
            ms_beat = max(1, math.floor(heartbeat * 1000))
            beat = f"Worker(broker, worker_timeout={ms_beat}) (env dramatiq_worker_timeout={ms_beat}): {beat}"
        lines.append(f"Dramatiq's heartbeat is every command of the worker's consumers: {beat} (default 1000 ms); "
                     "an actor that holds the GIL (C code) stops it for the whole process (dramatiq #692)")  # fmt: skip
        return lines

    def __init__(self, db: str) -> None:
        self.conn = connect(NAME, db, (*REDIS_URLS, "unix://"))
        self._snapshot = self.conn.register_script(SNAPSHOT_LUA)
        self._workers: dict[str, _Worker] = {}  # contract worker name -> the Dramatiq worker of this process
        self._producer = _Worker("producer", self.conn, self.maintenance_chance)
        self._held: dict[tuple[str, int], tuple[_Worker, MessageProxy]] = {}
        self._lease_ms: int | None = None

    # -- the contract ------------------------------------------------------------------------

    def register(self, task_id: str, now: float) -> None:
        self.register_many([task_id], now)

    def register_many(self, task_ids: list[str], now: float) -> None:
        producer = self._producer
        for task in dict.fromkeys(task_ids):
            if not self.conn.sadd(TASKS_KEY, task):
                continue  # registered before: Dramatiq would enqueue a second message
            with self.conn.pipeline(transaction=True) as pipe, self._at(producer, now), _into(producer.broker, pipe):
                message = producer.broker.enqueue(
                    Message(queue_name=QUEUE, actor_name=ACTOR, args=(), kwargs={}, options={}, message_id=task)
                )
                pipe.hset(MIDS_KEY, task, message.options["redis_message_id"])
                pipe.execute()

    def claim(self, worker: str, now: float, lease: float) -> Claim | None:
        w = self._worker(worker, lease)
        with self._at(w, now):
            stamp = _dramatiq_redis.current_millis()
            fetched = w.broker.do_fetch(QUEUE, 1)
        if not fetched:
            return None
        [data] = fetched
        if data is None:  # an id with no data (Dramatiq's consumer logs it, dramatiq #266, and skips it)
            return None
        message = Message.decode(data)
        task = str(message.message_id)
        generation = int(self.conn.hincrby(HANDOUTS_KEY, task, 1))
        w.consumer.queued_message_ids.add(message.message_id)  # as __next__ does
        self._held[(task, generation)] = (w, MessageProxy(message))
        return task, generation, self._until(stamp)

    def extend(self, task_id: str, generation: int, now: float, lease: float) -> float | None:
        held = self._held.get((task_id, generation))
        if held is None:
            return None  # this process never held that hand-out: it has no actor running it to beat for
        w, _ = held
        with self._at(w, now):
            stamp = _dramatiq_redis.current_millis()
            w.broker.do_fetch(dq_name(QUEUE), DELAY_PREFETCH)
        return self._until(stamp)

    def finish(self, task_id: str, generation: int, outcome: str, now: float) -> bool:
        """``post_process_message``: ack or nack, by the worker's own ack set; True when it acted."""
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, got {outcome!r}")
        held = self._held.pop((task_id, generation), None)
        if held is None:
            return False  # no consumer of this process fetched it: no Dramatiq worker would ack it
        w, message = held
        acks = f"{ACKS_PREFIX}{w.broker.broker_id}{ACKS_SUFFIX}"
        with self.conn.pipeline(transaction=True) as pipe, self._at(w, now), _into(w.broker, pipe):
            pipe.sismember(acks, message.options["redis_message_id"])
            if outcome == "done":
                w.consumer.ack(message)
            else:
                message.fail()
                w.consumer.nack(message)
            member = pipe.execute()[0]
        return bool(member)

    def snapshot(self) -> list[SnapshotRow]:
        lease_ms = self._stored_lease()
        keys = [TASKS_KEY, MIDS_KEY, HANDOUTS_KEY, QUEUE_KEY, MSGS_KEY, DEAD_MSGS_KEY, HEARTBEATS]
        rows = cast(list[list[Any]], self._snapshot(keys=keys, args=[ACKS_PREFIX, ACKS_SUFFIX]))
        out: list[SnapshotRow] = []
        for raw_id, raw_handouts, in_msgs, dead, queued, holders, beat in rows:
            task, generation = raw_id.decode(), int(raw_handouts)
            if dead and not in_msgs:
                out.append((task, "uncertain", generation, None))
            elif not in_msgs:
                state = "done" if generation > 0 else "unknown(acked, never handed out)"
                out.append((task, state, generation, None))
            elif holders == 1 and generation == 0:  # a claim in flight: fetched, its hand-out not yet counted
                out.append((task, "pending", 0, None))
            elif holders == 1:
                until = float(beat) / 1000 + lease_ms / 1000 if beat and lease_ms else None
                out.append((task, "running" if not queued else "unknown(queued and held)", generation, until))
            elif holders > 1:
                out.append((task, f"unknown(in {holders} ack sets)", generation, None))
            elif queued == 1:
                out.append((task, "pending", generation, None))
            else:
                where = f"queued {queued} times" if queued else "neither queued nor in an ack set"
                out.append((task, f"unknown({where})", generation, None))
        out.sort()
        return out

    def close(self) -> None:
        """What a killed worker leaves: its ack sets stay until another worker's maintenance finds it dead."""
        self.conn.close()

    # -- helpers -----------------------------------------------------------------------------

    def _stored_lease(self) -> int | None:
        if self._lease_ms is None:
            stored = self.conn.get(LEASE_KEY)
            self._lease_ms = int(stored) if stored is not None else None
        return self._lease_ms

    def _worker(self, worker: str, lease: float) -> _Worker:
        """The Dramatiq worker behind a contract worker name; the run's first claim stores its lease as
        every broker's ``heartbeat_timeout``."""
        if self._stored_lease() is None:
            self.conn.set(LEASE_KEY, max(1, round(lease * 1000)), nx=True)
        w = self._workers.get(worker)
        if w is None:
            w = self._workers[worker] = _Worker(worker, self.conn, self.maintenance_chance)
        return w

    def _until(self, stamp: int) -> float:
        """A heartbeat at ``stamp`` (ms) keeps the worker alive until ``stamp + heartbeat_timeout``:
        the maintenance finds it dead when its score is at most now - heartbeat_timeout."""
        return (stamp + cast(int, self._stored_lease())) / 1000

    @contextmanager
    def _at(self, w: _Worker, now: float) -> Iterator[None]:
        """The broker's clock (``current_millis``) and its maintenance's draw during one call; the run's
        ``heartbeat_timeout`` on the broker (a producer's is set once a claim has stored it)."""
        lease_ms = self._stored_lease()
        if lease_ms is not None:
            w.broker.heartbeat_timeout = lease_ms
        saved_clock, saved_random = _dramatiq_redis.current_millis, _dramatiq_redis.random
        ms = int(now * 1000)
        _dramatiq_redis.current_millis = lambda: ms
        _dramatiq_redis.random = w.random  # type: ignore[assignment]
        try:
            yield
        finally:
            _dramatiq_redis.current_millis = saved_clock
            _dramatiq_redis.random = saved_random


@contextmanager
def _into(broker: RedisBroker, pipe: redis.client.Pipeline) -> Iterator[None]:
    """The broker's dispatch script queued on ``pipe`` (a ``MULTI``) instead of run at once: the same
    script with the same arguments, so that the adapter's own reads or writes beside it are atomic with it."""
    real = broker.scripts["dispatch"]
    queued: Callable[..., Any] = lambda keys, args: real(keys=keys, args=args, client=pipe)  # noqa: E731
    broker.scripts["dispatch"] = queued
    try:
        yield
    finally:
        broker.scripts["dispatch"] = real


class DramatiqMaintainAlwaysAdapter(DramatiqAdapter):
    """``takeover.adapters.dramatiq:DramatiqMaintainAlwaysAdapter`` — ``RedisBroker(maintenance_chance=
    1000000)``: every command (but an ack or a nack) runs the maintenance of its queue."""

    maintenance_chance = _dramatiq_redis.MAINTENANCE_SCALE
