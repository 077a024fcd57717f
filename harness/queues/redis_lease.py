"""The reference lease queue on Redis: the spec's semantics, exactly, each operation one Lua script.

``takeover.queues.redis_lease:RedisLeaseQueue``, the default queue with ``--db redis`` or a ``redis://``
URL. Its constructor takes the URL of the run's (empty) logical database, ``redis://127.0.0.1:PORT/N``
(takeover.contract), and uses redis-py.

Why each piece is shaped as it is:

- **Every operation is one Lua script** (``EVALSHA``; redis-py loads it again after a server restart
  forgot it). Redis runs a script alone, start to end, so a claim's read of the claimable task and its
  write of the new holder are one atomic step: two workers can never both take one task. The same two
  steps as separate commands are a read-then-write race (planted: ``planted_redis.SplitClaim``); ``WATCH``
  and ``MULTI`` could close it too, at the price of a retry loop in every client.
- **Where a claim looks**: a sorted set of the pending tasks scored by registration order and one of the
  running tasks scored by lease end. A claim takes the running task with the lowest lease end when that
  end is at or before ``now`` (an expired lease, oldest expiry first: it has waited longest), else the first
  pending task: two O(log n) look-ups, whatever number of tasks are finished. Finished tasks are in neither
  set, so they are never claimable again.
- **The generation fences completion**: each task is a hash with its state, generation, lease end and
  registration number. Claim raises the generation by one (``HINCRBY``); finish and extend go through only
  for the current generation of a ``running`` task whose lease has not run out at the ``now`` given;
  resolve only for an ``uncertain`` task at that generation.
- **The caller's clock only**: every time comes from the ``now`` passed in; the scripts never call
  ``TIME`` and no key's expiry decides a lease (a ``SET NX PX`` lock would let the *server's* clock decide,
  and carries no fence: planted ``planted_redis.LockAsLease``).
- **Floats exactly**: Lua numbers are doubles, but ``tostring`` keeps only 14 digits. The lease end is
  computed here (``now + lease``, the same double the SQL queues compute), sent as ``repr`` (which a double
  survives exactly), stored as that string in the hash and as the same double in the running set, and
  returned as the string it was sent as. Comparisons in Lua use ``tonumber`` of both strings: exact.
- **A retried call runs once** (the issue's "a lost reply can run a claim twice"). redis-py retries a
  command on a new connection after a connection error or a timeout (in redis-py 8.1, a client made with
  ``redis.Redis(host=...)`` does by default: up to 10 times, 5 s socket timeout; one made with ``from_url``
  does not, so this queue asks for the same retries itself, whatever the version). The first try may have
  run before its reply was lost: a server killed
  after its fsync, a connection killed, a reply slower than the timeout, a frozen server that reads the old
  connection's command after it resumes. A claim run twice would take two tasks and return one: the other
  stays running under a generation no caller ever saw until its lease runs out, and the snapshot
  contradicts the history (``state_matches_history``); a finish run twice would answer False to a finish
  that went through. So every call that changes state carries a request id, unique per call (a random
  prefix per queue object and a counter), which redis-py sends again, unchanged, on each retry; the script
  that changes state records its answer under that id in the same atomic step, and a script that finds
  the id answers what was recorded instead of running again. The record is written only when state
  changed (a refused finish, an empty claim: running again is harmless), and it expires after
  :data:`REQUEST_TTL_MS` of server time, far beyond any retry; it never decides a lease. It is written
  with its change, so a server that loses the change (no fsync yet, no persistence) loses the record too,
  and the retry runs as a first call. Without it (planted ``planted_redis.RetriedClaim``) the queue is
  correct only with the client's retries off, where a lost reply is an error and its outcome unknown.

Keys all carry the hash tag ``{tq}`` so a Redis Cluster puts them in one slot (a script may touch only
keys of one slot there); the claim builds its task's key inside the script, which a cluster tolerates
within a slot. A connection the server closed is replaced on the next call (redis-py).
"""

from __future__ import annotations

import itertools
import os
from typing import Any

from takeover._internal.db import REDIS
from takeover.contract import OUTCOMES, Claim, SnapshotRow
from takeover.queues.sqlite_lease import RESOLUTIONS, check_lease, check_task_id, check_time

PREFIX = "{tq}:"
SEQ, ALL, PENDING, RUNNING = (PREFIX + name for name in ("seq", "all", "pending", "running"))
TASK = PREFIX + "task:"  # + task id: the task's hash (state, generation, lease_until, seq, worker, registered)
REQUEST = PREFIX + "req:"  # + request id: the answer of a call that changed state (a retry finds it)
REQUEST_TTL_MS = 300_000  # five minutes: the longest retry (10 tries, 5 s timeouts) is about one
RETRIES, BACKOFF_BASE, BACKOFF_CAP = 10, 0.01, 1.0  # redis.Redis(host=...)'s own default in redis-py 8.1

# KEYS: seq, all, pending. ARGV: now, task ids... Registering a known task (in the store, or earlier in
# the batch) changes nothing; a batch is one script: registered all at once, in its order.
REGISTER = """
for i = 2, #ARGV do
  local id = ARGV[i]
  local task = '%(task)s' .. id
  if redis.call('EXISTS', task) == 0 then
    local seq = redis.call('INCR', KEYS[1])
    redis.call('HSET', task, 'state', 'pending', 'generation', 0, 'seq', seq, 'registered', ARGV[1])
    redis.call('ZADD', KEYS[2], seq, id)
    redis.call('ZADD', KEYS[3], seq, id)
  end
end
return 0
"""

# KEYS: pending, running, request. ARGV: now, lease_until, worker, ttl ms.
# An expired lease first (lowest lease end, if at or before now), else the oldest pending task.
CLAIM = """
%(replay)s
%(pick)s
if not id then return false end
local task = '%(task)s' .. id
local gen = %(bump)s
redis.call('HSET', task, 'state', 'running', 'lease_until', ARGV[2], 'worker', ARGV[3])
redis.call('ZREM', KEYS[1], id)
redis.call('ZADD', KEYS[2], ARGV[2], id)
redis.call('SET', KEYS[3], gen .. ' ' .. ARGV[2] .. ' ' .. id, 'PX', ARGV[4])
return {id, gen, ARGV[2]}
"""
# A retry of a claim that already ran answers what that run answered.
REPLAY = """
local done = redis.call('GET', KEYS[3])
if done then
  local gen, until_, id = string.match(done, '^(%d+) (%S+) (.*)$')
  return {id, tonumber(gen), until_}
end
"""
PICK_EXPIRED = "local id = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, 1)[1]\n"
PICK_PENDING = "if not id then id = redis.call('ZRANGE', KEYS[1], 0, 0)[1] end\n"
PICK = PICK_EXPIRED + PICK_PENDING
BUMP = "redis.call('HINCRBY', task, 'generation', 1)"

# The fence of finish and extend: this generation, still running, lease not run out at the caller's now.
# ARGV[2] is the generation, ARGV[3] now; s = HMGET(task, state, generation, lease_until).
FENCE = "s[1] == 'running' and tonumber(s[2]) == tonumber(ARGV[2]) and tonumber(ARGV[3]) < tonumber(s[3])"

# KEYS: task, running, request. ARGV: task id, generation, now, outcome, ttl ms.
FINISH = """
if redis.call('EXISTS', KEYS[3]) == 1 then return 1 end
local s = redis.call('HMGET', KEYS[1], 'state', 'generation', 'lease_until')
if not (%(fence)s) then %(refused)s end
redis.call('HSET', KEYS[1], 'state', ARGV[4])
%(clear)s
redis.call('SET', KEYS[3], '1', 'PX', ARGV[5])
return 1
"""
# A finished task has no lease, and leaves the running set: no claim looks at it again.
CLEAR_LEASE = "redis.call('HDEL', KEYS[1], 'lease_until') redis.call('ZREM', KEYS[2], ARGV[1])"

# KEYS: task, running, request. ARGV: task id, generation, now, lease_until, ttl ms. Never shortens a lease.
EXTEND = """
local done = redis.call('GET', KEYS[3])
if done then return done end
local s = redis.call('HMGET', KEYS[1], 'state', 'generation', 'lease_until')
if not (%(fence)s) then return false end
local until_ = s[3]
if tonumber(ARGV[4]) > tonumber(until_) then
  until_ = ARGV[4]
  redis.call('HSET', KEYS[1], 'lease_until', until_)
  redis.call('ZADD', KEYS[2], until_, ARGV[1])
end
redis.call('SET', KEYS[3], until_, 'PX', ARGV[5])
return until_
"""

# KEYS: task, pending, request. ARGV: task id, generation, resolution, ttl ms. Only an uncertain task at
# that generation; back to pending it keeps its place in registration order, and its generation (the
# retry's claim raises it, so an old holder stays fenced).
RESOLVE = """
if redis.call('EXISTS', KEYS[3]) == 1 then return 1 end
local s = redis.call('HMGET', KEYS[1], 'state', 'generation', 'seq')
if s[1] ~= 'uncertain' or tonumber(s[2]) ~= tonumber(ARGV[2]) then return 0 end
if ARGV[3] == 'done' then
  redis.call('HSET', KEYS[1], 'state', 'done')
else
  redis.call('HSET', KEYS[1], 'state', 'pending')
  redis.call('HDEL', KEYS[1], 'worker')
  redis.call('ZADD', KEYS[2], s[3], ARGV[1])
end
redis.call('SET', KEYS[3], '1', 'PX', ARGV[4])
return 1
"""

# KEYS: all. Every task in registration order, flat: id, state, generation, lease_until (nil when none);
# one script, so one consistent moment.
SNAPSHOT = """
local out = {}
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local s = redis.call('HMGET', '%(task)s' .. id, 'state', 'generation', 'lease_until')
  out[#out + 1] = id
  out[#out + 1] = s[1]
  out[#out + 1] = tonumber(s[2])
  out[#out + 1] = s[3]
end
return out
"""


def claim_script(pick: str = PICK, bump: str = BUMP, replay: str = REPLAY) -> str:
    """The claim: ``pick`` sets ``id`` to the claimable task (or nil), ``bump`` is its new generation,
    ``replay`` answers a retried call."""
    return CLAIM % {"pick": pick, "task": TASK, "bump": bump, "replay": replay}


def finish_script(fence: str = FENCE, clear: str = CLEAR_LEASE, refused: str = "return 0") -> str:
    """The finish: accepted when ``fence`` holds (else ``refused`` answers); ``clear`` drops the lease."""
    return FINISH % {"fence": fence, "clear": clear, "refused": refused}


def number(value: float) -> str:
    """A time as Redis and Lua get it: ``repr`` of the double, which ``tonumber`` reads back exactly."""
    return repr(float(value))


class RedisLeaseQueue:
    """The queue the spec describes, on one Redis logical database."""

    databases = (REDIS,)  # takeover.contract: it takes a redis:// URL

    REGISTER = REGISTER % {"task": TASK}
    CLAIM = claim_script()
    FINISH = finish_script()
    EXTEND = EXTEND % {"fence": FENCE}
    RESOLVE = RESOLVE
    SNAPSHOT = SNAPSHOT % {"task": TASK}

    def __init__(self, url: str) -> None:
        import redis
        from redis.backoff import ExponentialWithJitterBackoff
        from redis.retry import Retry

        self.url = url
        # Retries on a connection error or a timeout, safe because each call runs once (the module's docstring).
        retry = Retry(ExponentialWithJitterBackoff(base=BACKOFF_BASE, cap=BACKOFF_CAP), RETRIES)
        self._client: Any = redis.Redis.from_url(url, decode_responses=True, retry=retry)
        self._client.ping()  # an unreachable server fails the open, in one line (takeover.contract)
        scripts = ("REGISTER", "CLAIM", "FINISH", "EXTEND", "RESOLVE", "SNAPSHOT")
        self._scripts = {name: self._client.register_script(getattr(self, name)) for name in scripts}
        self._ids = (f"{os.urandom(8).hex()}:{n}" for n in itertools.count())

    def _run(self, name: str, keys: list[str], args: list[Any]) -> Any:
        return self._scripts[name](keys=keys, args=args)

    def _request(self) -> str:
        """The key of this call's answer: the same on each of redis-py's retries of the call."""
        return REQUEST + next(self._ids)

    def register(self, task_id: str, now: float) -> None:
        self.register_many([task_id], now)

    def register_many(self, task_ids: list[str], now: float) -> None:
        """Optional extension: one script for a batch."""
        for task_id in task_ids:
            check_task_id(task_id)
        check_time("now", now)
        if task_ids:
            self._run("REGISTER", [SEQ, ALL, PENDING], [number(now), *task_ids])

    def claim(self, worker: str, now: float, lease: float) -> Claim | None:
        check_time("now", now)
        check_lease(lease)
        got = self._run("CLAIM", [PENDING, RUNNING, self._request()], self._claim_args(worker, now, lease))
        return None if got is None else (got[0], int(got[1]), float(got[2]))

    def _claim_args(self, worker: str, now: float, lease: float) -> list[Any]:
        """ARGV of the claim: the time its pick judges leases by, the new lease's end, the worker, the TTL."""
        return [number(now), number(now + lease), worker, REQUEST_TTL_MS]

    def finish(self, task_id: str, generation: int, outcome: str, now: float) -> bool:
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, got {outcome!r}")
        check_task_id(task_id)
        check_time("now", now)
        got = self._run(
            "FINISH",
            [TASK + task_id, RUNNING, self._request()],
            [task_id, str(generation), number(now), outcome, REQUEST_TTL_MS],
        )
        return got == 1

    def extend(self, task_id: str, generation: int, now: float, lease: float) -> float | None:
        """Optional extension (heartbeat), fenced like finish; see SQLiteLeaseQueue.extend."""
        check_task_id(task_id)
        check_time("now", now)
        check_lease(lease)
        got = self._run(
            "EXTEND",
            [TASK + task_id, RUNNING, self._request()],
            [task_id, str(generation), number(now), number(now + lease), REQUEST_TTL_MS],
        )
        return None if got is None else float(got)

    def resolve(self, task_id: str, generation: int, resolution: str, now: float) -> bool:
        """Optional extension (reconciliation); see SQLiteLeaseQueue.resolve."""
        if resolution not in RESOLUTIONS:
            raise ValueError(f"resolution must be one of {RESOLUTIONS}, got {resolution!r}")
        check_task_id(task_id)
        check_time("now", now)
        got = self._run(
            "RESOLVE",
            [TASK + task_id, PENDING, self._request()],
            [task_id, str(generation), resolution, REQUEST_TTL_MS],
        )
        return got == 1

    def snapshot(self) -> list[SnapshotRow]:
        flat = self._run("SNAPSHOT", [ALL], [])
        return [
            (flat[i], flat[i + 1], int(flat[i + 2]), None if flat[i + 3] is None else float(flat[i + 3]))
            for i in range(0, len(flat), 4)
        ]

    def close(self) -> None:
        self._client.close()
