'use strict';
// Bee-Queue 2.0 behind takeover's JSON-lines protocol (docs/reference/protocol.md): translation only.
//
//   --queue "exec:node adapters/js/beequeue.js" --db redis                  (Bee-Queue's default worker)
//   --queue "exec:node adapters/js/beequeue.js --check-stalled" --db redis  (its README's advice)
//
// Each contract call is what Bee-Queue's own worker (Queue#process, lib/queue.js) calls:
//   register -> queue.createJob({task_id}).setId(task_id).save() (addJob.lua adds nothing for a known id)
//   claim    -> with --check-stalled, queue.checkStalledJobs() first (the README: "call it on an interval";
//               its script runs at most once per stallInterval, whoever calls it); then the worker's pop,
//               RPOPLPUSH waiting -> active (the worker's BRPOPLPUSH without blocking), and Job.fromId.
//               Bee-Queue counts no attempts: the generation is the adapter's own count of hand-outs
//               (HINCRBY right after the pop), an observation BullMQ-style queues would have in the job
//   finish   -> queue._finishJob(err, data, job), the worker's call once the handler settles: done as a
//               success, uncertain as a failure with no retries left (failed, never retried). Bee-Queue
//               checks no holder: accepted whenever the job exists
//   extend   -> queue._preventStall(id), the worker's "phone home" every stallInterval / 2 (SREM from the
//               stalling set), by job id alone: accepted whenever the job exists
//   snapshot -> the waiting and delayed lists (pending), active (running), succeeded (done), failed
//               (uncertain), read in one script
// Without --check-stalled the only stall check is the one Queue#process runs when a worker starts
// (lib/queue.js:750): the adapter runs it at its first claim, as a starting worker does.
//
// The clock. A job is stalled when it stayed in the `stalling` set from one check to the next; a check
// runs at most once per stallInterval (`stallBlock`, SET PX NX on the Redis server's clock). The contract's
// lease is stallInterval: a job is re-enqueued no sooner than one stallInterval after its claim or its last
// heartbeat (and up to two later). As in bullmq.js: stress runs (`now` is this machine's clock, the
// server's too) run as they are; scenarios (a logical clock) wait until 0.1 real second per logical second
// has passed since the run's first call (kept in Redis for every process), so the scenarios' lease of 30
// is a 3 s stallInterval.
const Queue = require('bee-queue');
const Job = require('bee-queue/lib/job');
const { serve, logOnce } = require('./protocol');
const { PacedClock } = require('./paced');
const { checkLease, checkTaskId, checkOutcome } = require('./checks');

const QUEUE = 'takeover';
const GENERATIONS = 'takeover:bq:generation'; // hash: job id -> hand-outs
const LEASES = 'takeover:bq:leases'; // hash: job id -> the lease_until last answered

const args = process.argv.slice(2);
if (args.some((a) => a !== '--check-stalled')) {
  process.stderr.write(`beequeue.js: usage: [--check-stalled]; got ${args.join(' ')}\n`);
  process.exit(2);
}
const CHECK_STALLED = args.includes('--check-stalled');

const call = (fn) => new Promise((resolve, reject) => fn((err, value) => (err ? reject(err) : resolve(value))));

// Every job once, where it is: active (running) before waiting or delayed (pending) before its recorded
// status (succeeded: done, failed: uncertain). A job can be in two places in Bee-Queue (completed late by a
// worker while re-enqueued: succeeded and waiting); the place decides what happens to it next.
const SNAPSHOT = `
local out, seen = {}, {}
local function add(ids, state)
  for _, id in ipairs(ids) do
    if not seen[id] then
      seen[id] = true
      local data = redis.call('HGET', KEYS[6], id) or '{}'
      local here = state
      if here == nil then
        here = cjson.decode(data).status == 'failed' and 'uncertain' or 'done'
      end
      out[#out + 1] = id
      out[#out + 1] = here
      out[#out + 1] = data
      out[#out + 1] = redis.call('HGET', KEYS[7], id) or '0'
      out[#out + 1] = redis.call('HGET', KEYS[8], id) or ''
    end
  end
end
add(redis.call('LRANGE', KEYS[3], 0, -1), 'running')
add(redis.call('LRANGE', KEYS[1], 0, -1), 'pending')
add(redis.call('ZRANGE', KEYS[2], 0, -1), 'pending')
add(redis.call('SMEMBERS', KEYS[4]), nil)
add(redis.call('SMEMBERS', KEYS[5]), nil)
return out
`;

class BeeQueue {
  static async open(url) {
    if (!url || !url.startsWith('redis://')) throw new Error(`beequeue.js takes a redis:// URL (--db redis), got ${url}`);
    const q = new BeeQueue();
    q.settings = { redis: { url }, isWorker: true, getEvents: false, sendEvents: false, activateDelayedJobs: false,
      removeOnSuccess: false, removeOnFailure: false, stallInterval: 5000 };
    q.queue = new Queue(QUEUE, q.settings);
    q.queue.on('error', logOnce('bee-queue'));
    await q.queue.ready();
    q.client = q.queue.client;
    q.clock = new PacedClock('takeover:bq:epoch', (k, v) => q.redis('set', k, v, 'NX'), (k) => q.redis('get', k));
    q.started = false; // Queue#process's one stall check: at the first claim, once stallInterval is known
    return q;
  }

  async redis(name, ...rest) {
    return call((done) => this.client[name](...rest, done));
  }

  async pace(now) {
    await this.clock.wait(now);
  }

  // stallInterval for a lease of `lease` contract seconds, in real ms.
  stallMs(now, lease) {
    return Math.max(1, Math.round(this.clock.scale(now, lease)));
  }

  async register(taskId, now) {
    await this.registerMany([taskId], now);
  }

  async registerMany(taskIds, now) {
    taskIds.forEach(checkTaskId);
    await this.pace(now);
    await Promise.all(taskIds.map((t) => this.queue.createJob({ task_id: t }).setId(t).save()));
  }

  async claim(worker, now, lease) {
    checkLease(lease);
    await this.pace(now);
    this.queue.settings.stallInterval = this.stallMs(now, lease); // _doStalledJobCheck reads it per call
    if (CHECK_STALLED || !this.started) await this.queue._doStalledJobCheck();
    this.started = true;
    const id = await this.redis('rpoplpush', this.queue.toKey('waiting'), this.queue.toKey('active'));
    if (id === null) return null;
    const job = await Job.fromId(this.queue, id);
    const generation = Number(await this.redis('hincrby', GENERATIONS, id, 1));
    const until = now + lease;
    await this.redis('hset', LEASES, id, String(until));
    return [job ? job.data.task_id : id, generation, until];
  }

  async finish(taskId, generation, outcome, now) {
    checkTaskId(taskId);
    checkOutcome(outcome);
    await this.pace(now);
    const job = await Job.fromId(this.queue, taskId);
    if (!job) return false;
    job.options.retries = 0; // an uncertain outcome is failed, never retried
    const err = outcome === 'done' ? null : new Error('uncertain');
    await this.queue._finishJob(err, outcome === 'done' ? { outcome } : undefined, job);
    return true;
  }

  async extend(taskId, generation, now, lease) {
    checkTaskId(taskId);
    checkLease(lease);
    await this.pace(now);
    if (!(await this.redis('hexists', this.queue.toKey('jobs'), taskId))) return false;
    await this.queue._preventStall(taskId);
    const until = now + lease;
    await this.redis('hset', LEASES, taskId, String(until));
    return until;
  }

  async snapshot() {
    const k = (name) => this.queue.toKey(name);
    const flat = await this.redis('eval', SNAPSHOT, 8, k('waiting'), k('delayed'), k('active'), k('succeeded'),
      k('failed'), k('jobs'), GENERATIONS, LEASES);
    const rows = [];
    for (let i = 0; i < flat.length; i += 5) {
      const [id, state, data, generation, until] = flat.slice(i, i + 5);
      rows.push([JSON.parse(data).data.task_id, state, Number(generation),
        state === 'running' && until !== '' ? Number(until) : null]);
    }
    rows.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
    return rows;
  }

  async close() {
    await this.queue.close();
  }
}

// The library, as a bug report names it (`takeover replay --issue`, `takeover scenarios --file F --issue`).
const LIBRARY = {
  name: 'bee-queue', version: require('bee-queue/package.json').version, home: 'https://github.com/bee-queue/bee-queue',
  calls: {
    "register": "`queue.createJob({task_id}).setId(id).save()`",
    "claim": "(with --check-stalled: `queue.checkStalledJobs()`, then) the worker's pop, `RPOPLPUSH waiting active`, and `Job.fromId(id)`",
    "finish:done": "`queue._finishJob(null, data, job)` (the worker's call when its handler succeeds)",
    "finish:uncertain": "`queue._finishJob(err, null, job)` with no retries left",
    "extend": "`queue._preventStall(id)` (the worker's heartbeat)",
    "snapshot": "the waiting, delayed, active, succeeded and failed sets",
  },
  states: { pending: "waiting", running: "active", done: "succeeded", uncertain: "failed" },
};
serve({ library: LIBRARY, databases: ['redis'], register_many: true, extend: true }, (url) => BeeQueue.open(url));
