'use strict';
// The reference lease queue in JavaScript on Redis with `ioredis`: the spec's semantics exactly, as
// takeover.queues.redis_lease has them. Each operation is the same Lua script (tests/system/test_bridge_redis.py
// compares the two texts), so the two queues differ in the language and the bridge only. Why each script is
// shaped as it is, the Python module's docstring says; in short:
// - every operation is one script (EVALSHA, EVAL when the server forgot it): Redis runs it alone, so a
//   claim's read of the claimable task and its write of the new holder are one step;
// - a claim takes the running task with the lowest lease end if that end is at or before `now`, else the
//   first pending task (two sorted sets): finished tasks are in neither, never claimable again;
// - finish and extend are fenced by the generation, the state and the lease on the caller's clock;
// - times travel as the shortest text that reads back as the same double (String(number)), and the lease
//   end comes back as the text it was sent as: Lua's tostring would keep only 14 digits;
// - every call that changes state carries a request id and records its answer in the same script, because
//   ioredis resends a command whose reply was lost when it reconnects (autoResendUnfulfilledCommands): the
//   resent claim answers the first run's claim instead of taking a second task.
const crypto = require('node:crypto');
const Redis = require('ioredis');
const { checkTime, checkLease, checkTaskId, checkOutcome } = require('./checks');

const PREFIX = '{tq}:';
const SEQ = PREFIX + 'seq';
const ALL = PREFIX + 'all';
const PENDING = PREFIX + 'pending';
const RUNNING = PREFIX + 'running';
const TASK = PREFIX + 'task:';
const REQUEST = PREFIX + 'req:';
const REQUEST_TTL_MS = 300000;

const REGISTER = `
for i = 2, #ARGV do
  local id = ARGV[i]
  local task = '${TASK}' .. id
  if redis.call('EXISTS', task) == 0 then
    local seq = redis.call('INCR', KEYS[1])
    redis.call('HSET', task, 'state', 'pending', 'generation', 0, 'seq', seq, 'registered', ARGV[1])
    redis.call('ZADD', KEYS[2], seq, id)
    redis.call('ZADD', KEYS[3], seq, id)
  end
end
return 0
`;
const REPLAY = `
local done = redis.call('GET', KEYS[3])
if done then
  local gen, until_, id = string.match(done, '^(%d+) (%S+) (.*)$')
  return {id, tonumber(gen), until_}
end
`;
const PICK = "local id = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, 1)[1]\n" +
  "if not id then id = redis.call('ZRANGE', KEYS[1], 0, 0)[1] end\n";
const CLAIM = `
${REPLAY}
${PICK}
if not id then return false end
local task = '${TASK}' .. id
local gen = redis.call('HINCRBY', task, 'generation', 1)
redis.call('HSET', task, 'state', 'running', 'lease_until', ARGV[2], 'worker', ARGV[3])
redis.call('ZREM', KEYS[1], id)
redis.call('ZADD', KEYS[2], ARGV[2], id)
redis.call('SET', KEYS[3], gen .. ' ' .. ARGV[2] .. ' ' .. id, 'PX', ARGV[4])
return {id, gen, ARGV[2]}
`;
const FENCE = "s[1] == 'running' and tonumber(s[2]) == tonumber(ARGV[2]) and tonumber(ARGV[3]) < tonumber(s[3])";
const CLEAR_LEASE = "redis.call('HDEL', KEYS[1], 'lease_until') redis.call('ZREM', KEYS[2], ARGV[1])";

// The finish accepted when `fence` holds (planted.js plants a weaker one).
function finishScript(fence = FENCE) {
  return `
if redis.call('EXISTS', KEYS[3]) == 1 then return 1 end
local s = redis.call('HMGET', KEYS[1], 'state', 'generation', 'lease_until')
if not (${fence}) then return 0 end
redis.call('HSET', KEYS[1], 'state', ARGV[4])
${CLEAR_LEASE}
redis.call('SET', KEYS[3], '1', 'PX', ARGV[5])
return 1
`;
}
const FINISH = finishScript();
const EXTEND = `
local done = redis.call('GET', KEYS[3])
if done then return done end
local s = redis.call('HMGET', KEYS[1], 'state', 'generation', 'lease_until')
if not (${FENCE}) then return false end
local until_ = s[3]
if tonumber(ARGV[4]) > tonumber(until_) then
  until_ = ARGV[4]
  redis.call('HSET', KEYS[1], 'lease_until', until_)
  redis.call('ZADD', KEYS[2], until_, ARGV[1])
end
redis.call('SET', KEYS[3], until_, 'PX', ARGV[5])
return until_
`;
const SNAPSHOT = `
local out = {}
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local s = redis.call('HMGET', '${TASK}' .. id, 'state', 'generation', 'lease_until')
  out[#out + 1] = id
  out[#out + 1] = s[1]
  out[#out + 1] = tonumber(s[2])
  out[#out + 1] = s[3]
end
return out
`;

// A time as Redis and Lua get it: the shortest text that reads back as the same double.
function number(value) {
  return String(value);
}

class RedisReferenceQueue {
  constructor(client) {
    this.client = client;
    this.prefix = crypto.randomBytes(8).toString('hex');
    this.calls = 0;
  }

  static async open(url, finish = FINISH) {
    const client = new Redis(url, { lazyConnect: true });
    client.on('error', (err) => process.stderr.write(`redis.js: ${err.message}\n`)); // reconnects on its own
    const scripts = { tqRegister: [3, REGISTER], tqClaim: [3, CLAIM], tqFinish: [3, finish], tqExtend: [3, EXTEND],
      tqSnapshot: [1, SNAPSHOT] };
    for (const [name, [numberOfKeys, lua]] of Object.entries(scripts)) client.defineCommand(name, { numberOfKeys, lua });
    await client.connect();
    return new RedisReferenceQueue(client);
  }

  // The key of this call's answer: the same on each resend of the call.
  request() {
    this.calls += 1;
    return `${REQUEST}${this.prefix}:${this.calls}`;
  }

  async register(taskId, now) {
    await this.registerMany([taskId], now);
  }

  async registerMany(taskIds, now) {
    taskIds.forEach(checkTaskId);
    checkTime('now', now);
    if (taskIds.length) await this.client.tqRegister(SEQ, ALL, PENDING, number(now), ...taskIds);
  }

  async claim(worker, now, lease) {
    checkTime('now', now);
    checkLease(lease);
    const got = await this.client.tqClaim(PENDING, RUNNING, this.request(), number(now), number(now + lease), worker,
      REQUEST_TTL_MS);
    return got === null ? null : [got[0], got[1], Number(got[2])];
  }

  async finish(taskId, generation, outcome, now) {
    checkOutcome(outcome);
    checkTaskId(taskId);
    checkTime('now', now);
    const got = await this.client.tqFinish(TASK + taskId, RUNNING, this.request(), taskId, String(generation),
      number(now), outcome, REQUEST_TTL_MS);
    return got === 1;
  }

  async extend(taskId, generation, now, lease) {
    checkTaskId(taskId);
    checkTime('now', now);
    checkLease(lease);
    const got = await this.client.tqExtend(TASK + taskId, RUNNING, this.request(), taskId, String(generation),
      number(now), number(now + lease), REQUEST_TTL_MS);
    return got === null ? false : Number(got);
  }

  async snapshot() {
    const flat = await this.client.tqSnapshot(ALL);
    const rows = [];
    for (let i = 0; i < flat.length; i += 4) {
      rows.push([flat[i], flat[i + 1], flat[i + 2], flat[i + 3] === null ? null : Number(flat[i + 3])]);
    }
    return rows;
  }

  async close() {
    await this.client.quit();
  }
}

module.exports = { RedisReferenceQueue, FINISH, finishScript, SCRIPTS: { REGISTER, CLAIM, FINISH, EXTEND, SNAPSHOT } };
