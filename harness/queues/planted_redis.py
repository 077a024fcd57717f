"""The planted bugs on Redis: ``takeover selftest --db redis``.

The first twelve are the Redis reference queue (takeover.queues.redis_lease) with the same one mistake as
their SQLite namesakes (takeover.queues.planted), written as Redis code would make it, and are expected to
be caught by the same invariants; what each bug is, and why real queues ship it, is told once, on the
SQLite class. Here only how it is planted. ``NonAtomicClaim`` is the Redis idiom of that bug: a claim
built from separate commands, without ``WATCH``/``MULTI`` or a script.

The others are mistakes of Redis queues that have no SQL namesake:

- :class:`LockAsLease`: the lease is a ``SET lock NX PX`` key, the idiom of a hundred blog posts and of
  Redis' own single-instance lock pattern, with no fencing token: the *server's* clock ends the lease (the
  key's expiry), and finish checks only that a lock exists, not whose. A holder whose lease ran out finishes
  while the next holder's lock lives (``no_stale_commit``), or after its own lease ended while the key, on
  the server's clock, has not yet expired (``finish_within_lease``).
- :class:`ClientClockReaper`: expired leases are found by the worker's own clock (``time.time()``), as
  Celery's ``restore_visible`` and RQ's registry cleanup judge them, not by the ``now`` the caller gives: a
  worker whose clock runs ahead of the holder's hands out a lease the holder still has
  (``lease_exclusive``).
- :class:`RetriedClaim`: the claim carries no request id, so redis-py's retry of a claim whose reply was lost
  claims a second task; the first stays running under a generation nobody was given until its lease runs out,
  then comes back a generation later (``generation_monotonic``'s gap, ``state_matches_history``'s probe: a
  generation no claim returned, which no unknown claim can have taken: takeover._internal.checker.unknown_claims). Only
  a lost answer inside a claim that took a task shows it, so the selftest runs it with
  ``--db-lost-reply-rate 3``.

Use one as ``--queue takeover.queues.planted_redis:NAME --db redis``.
"""

from __future__ import annotations

import time
import zlib
from typing import Any

from takeover._internal.coverage_space import expand
from takeover.contract import Claim, SnapshotRow
from takeover.queues import planted
from takeover.queues.redis_lease import (
    BUMP,
    CLEAR_LEASE,
    FENCE,
    PENDING,
    PICK_EXPIRED,
    RUNNING,
    TASK,
    RedisLeaseQueue,
    claim_script,
    finish_script,
    number,
)
from takeover.queues.sqlite_lease import check_lease

_STALE = "s[1] == 'running' and tonumber(ARGV[3]) < tonumber(s[3])"  # the fence without the generation


class FinishIgnoresGeneration(RedisLeaseQueue):
    """Finish by task id alone."""

    FINISH = finish_script(fence=_STALE)


class FinishIgnoresLease(RedisLeaseQueue):
    """Finish checks the generation, never the lease."""

    FINISH = finish_script(fence="s[1] == 'running' and tonumber(s[2]) == tonumber(ARGV[2])")


class ReclaimsTerminal(RedisLeaseQueue):
    """Finish forgets to take the task out of the running set (and keeps its lease), and the claim's expired
    pick trusts the set: a done task comes back once its lease time passes."""

    FINISH = finish_script(clear="")


class NoBumpOnTakeover(RedisLeaseQueue):
    """The generation is set on the first claim only."""

    CLAIM = claim_script(bump="(function() local g = math.max(tonumber(redis.call('HGET', task, 'generation')), 1) "
                              "redis.call('HSET', task, 'generation', g) return g end)()")  # fmt: skip


class BumpsByTwo(RedisLeaseQueue):
    """Every claim raises the generation by two."""

    CLAIM = claim_script(bump=BUMP.replace("'generation', 1)", "'generation', 2)"))


class StealsLiveLeases(RedisLeaseQueue):
    """Leases count as expired half a lease early (the expired pick alone sees the shifted ``now``)."""

    def _claim_args(self, worker: str, now: float, lease: float) -> list[Any]:
        return [number(now + lease / 2), *super()._claim_args(worker, now, lease)[1:]]


class IdempotentFinish(RedisLeaseQueue):
    """A refused finish of a finished task answers True."""

    FINISH = finish_script(refused="if s[1] == 'done' or s[1] == 'uncertain' then return 1 end return 0")


class FinishNotDurable(RedisLeaseQueue):
    """For about one task in four (the same tasks as on SQLite), a finish that would be accepted answers True
    and writes nothing."""

    FINISH_LOST = f"""
local s = redis.call('HMGET', KEYS[1], 'state', 'generation', 'lease_until')
if not ({FENCE}) then return 0 end
return 1
"""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self._lost = self._client.register_script(self.FINISH_LOST)

    def _run(self, name: str, keys: list[str], args: list[Any]) -> Any:
        if name == "FINISH" and zlib.crc32(args[0].encode()) % 4 == 0:
            return self._lost(keys=keys, args=args)
        return super()._run(name, keys, args)


class SnapshotOffByOne(RedisLeaseQueue):
    """The snapshot's generation is one too low."""

    def snapshot(self) -> list[SnapshotRow]:
        return [(t, s, max(g - 1, 0), lu) for t, s, g, lu in super().snapshot()]


class DropsTasks(RedisLeaseQueue):
    """The pending pick skips every 13th task it registered."""

    SKIPPING = """
if not id then
  local all = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
  for i = 1, #all, 2 do
    if tonumber(all[i + 1]) % 13 ~= 5 then id = all[i] break end
  end
end"""
    CLAIM = claim_script(pick=PICK_EXPIRED + SKIPPING)


class NonAtomicClaim(RedisLeaseQueue):
    """The claim is built from separate commands, without ``WATCH``/``MULTI`` or a script: the claimable task
    is read with one command and taken with four more. Two workers that claim at once read the same task and
    both take it."""

    def claim(self, worker: str, now: float, lease: float) -> Claim | None:
        client = self._client
        ids = client.zrangebyscore(RUNNING, "-inf", number(now), start=0, num=1) or client.zrange(PENDING, 0, 0)
        if not ids:
            return None
        task_id, until = ids[0], now + lease
        generation = client.hincrby(TASK + task_id, "generation", 1)
        client.hset(TASK + task_id, mapping={"state": "running", "lease_until": number(until), "worker": worker})
        client.zrem(PENDING, task_id)
        client.zadd(RUNNING, {task_id: until})
        return task_id, int(generation), until


class RegisterReplaces(RedisLeaseQueue):
    """Register is an upsert (``HSET`` whatever is there) that puts a known task back to pending at
    generation 0."""

    REGISTER = f"""
for i = 2, #ARGV do
  local id = ARGV[i]
  local task = '{TASK}' .. id
  local seq = redis.call('HGET', task, 'seq') or redis.call('INCR', KEYS[1])
  redis.call('HSET', task, 'state', 'pending', 'generation', 0, 'seq', seq, 'registered', ARGV[1])
  redis.call('HDEL', task, 'lease_until', 'worker')
  redis.call('ZREM', '{RUNNING}', id)
  redis.call('ZADD', KEYS[2], seq, id)
  redis.call('ZADD', KEYS[3], seq, id)
end
return 0
"""


LOCK = "{tq}:lock:"  # + task id: LockAsLease's lock key


class LockAsLease(RedisLeaseQueue):
    """The lease is ``SET lock:ID worker NX PX lease_ms``; a task is claimable when pending or when its lock
    key has expired (on the server's clock); finish and extend check only that a lock exists. The lease end
    and the generation are written down for the contract's answers and never consulted."""

    CLAIM = f"""
local id
for _, r in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  if redis.call('EXISTS', '{LOCK}' .. r) == 0 then id = r break end
end
if not id then id = redis.call('ZRANGE', KEYS[1], 0, 0)[1] end
if not id then return false end
redis.call('SET', '{LOCK}' .. id, ARGV[3], 'PX', ARGV[5])
local task = '{TASK}' .. id
local gen = redis.call('HINCRBY', task, 'generation', 1)
redis.call('HSET', task, 'state', 'running', 'lease_until', ARGV[2], 'worker', ARGV[3])
redis.call('ZREM', KEYS[1], id)
redis.call('ZADD', KEYS[2], ARGV[2], id)
return {{id, gen, ARGV[2]}}
"""
    FINISH = finish_script(fence=f"redis.call('EXISTS', '{LOCK}' .. ARGV[1]) == 1",
                           clear=f"{CLEAR_LEASE} redis.call('DEL', '{LOCK}' .. ARGV[1])")  # fmt: skip
    EXTEND = f"""
if redis.call('EXISTS', '{LOCK}' .. ARGV[1]) == 0 then return false end
redis.call('PEXPIRE', '{LOCK}' .. ARGV[1], ARGV[5])
redis.call('HSET', KEYS[1], 'lease_until', ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
return ARGV[4]
"""

    def _claim_args(self, worker: str, now: float, lease: float) -> list[Any]:
        return [*super()._claim_args(worker, now, lease), _milliseconds(lease)]

    def extend(self, task_id: str, generation: int, now: float, lease: float) -> float | None:
        check_lease(lease)
        got = self._run(
            "EXTEND",
            [TASK + task_id, RUNNING],
            [task_id, str(generation), number(now), number(now + lease), _milliseconds(lease)],
        )
        return None if got is None else float(got)


def _milliseconds(lease: float) -> int:
    return max(1, round(lease * 1000))


class ClientClockReaper(RedisLeaseQueue):
    """Expired leases are found by the worker's own clock (``time.time()``), not by the ``now`` given."""

    def _claim_args(self, worker: str, now: float, lease: float) -> list[Any]:
        return [number(time.time()), *super()._claim_args(worker, now, lease)[1:]]


class RetriedClaim(RedisLeaseQueue):
    """The claim carries no request id: a retry (redis-py's, after a lost reply) runs it again."""

    CLAIM = claim_script(replay="")


_HERE = (
    FinishIgnoresGeneration,
    FinishIgnoresLease,
    ReclaimsTerminal,
    NoBumpOnTakeover,
    BumpsByTwo,
    StealsLiveLeases,
    IdempotentFinish,
    FinishNotDurable,
    SnapshotOffByOne,
    DropsTasks,
    NonAtomicClaim,
    RegisterReplaces,
)
# name -> the invariants expected to catch it: the SQLite namesake's, in the SQLite table's order; then the
# Redis idioms.
PLANTED: dict[str, tuple[str, ...]] = {
    **{name: planted.PLANTED[name] for name in planted.PLANTED if name in {cls.__name__ for cls in _HERE}},
    "LockAsLease": ("no_stale_commit", "finish_within_lease"),
    "ClientClockReaper": ("lease_exclusive",),
    "RetriedClaim": ("generation_monotonic", "state_matches_history"),
}

# name -> what its stress runs add to the selftest's options: the one fault without which the bug cannot show.
# The worker's own clock and the `now` it is given differ only when the run skews the workers' clocks, and the
# default profile does not; a skew of half a lease made seed 1 break lease_exclusive twice (the reference
# VALID with the same skew).
# RetriedClaim needs a lost answer inside a claim that took a task, and most lost answers fall in finishes: at
# 3 lost answers a second its 10 s runs were INVALID on seeds 1-3 (at 1 a second, 20 s runs: 3 of 4), the
# reference VALID with the same rate.
STRESS_ARGS: dict[str, tuple[str, ...]] = {"ClientClockReaper": ("--clock-skew-max", "0.5"),
                                           "RetriedClaim": ("--db-lost-reply-rate", "3")}

# name -> the model-coverage cells each bug needs: the SQLite namesake's (the same defect, the same path); the
# lock's unfenced finish shows on a stale or a late finish, the reaper's steal on a takeover's pick.
NEEDS_CELLS: dict[str, tuple[str, ...]] = {
    **{name: planted.NEEDS_CELLS[name] for name in PLANTED if name in planted.NEEDS_CELLS},
    "LockAsLease": (*planted.NEEDS_CELLS["FinishIgnoresGeneration"], *planted.NEEDS_CELLS["FinishIgnoresLease"]),
    "ClientClockReaper": (*expand("claim/running/stale|expired|never/*"),),
    # a claim that took a task (its first run's): any first claim, or a takeover
    "RetriedClaim": (*expand("claim/pending/never/none"), *expand("claim/running/stale|expired|never/edge|past")),
}
