'use strict';
// BullMQ 6.7 behind takeover's JSON-lines protocol (docs/reference/protocol.md): translation only.
//
//   --queue "exec:node adapters/js/bullmq.js" --db redis                        (BullMQ's defaults)
//   --queue "exec:node adapters/js/bullmq.js --max-stalled-count 100" --db redis
//
// Each contract call is what BullMQ's own Worker calls when jobs are fetched by hand (its "manually
// fetching jobs" pattern; a Worker without a processor, autorun off):
//   register -> queue.add(name, {task_id}, {jobId: task_id}) (BullMQ adds nothing for an id it has)
//   claim    -> worker.moveStalledJobsToWait() (the stalled checker's two-pass script; the script itself
//               runs at most once per stalledInterval, whoever calls it), then worker.getNextJob(token):
//               moveToActive, which sets the job's lock `<job>:lock = token PX lockDuration`. The
//               generation is BullMQ's own attempt count, `attemptsStarted` (raised by moveToActive).
//   finish   -> job.moveToCompleted(result, token) for done, job.moveToFailed(err, token) for uncertain
//               (one attempt: failed, never retried); refused when BullMQ answers the lock is missing or
//               another's (codes -2, -6), or the job is not active (-3) or gone (-1)
//   extend   -> job.extendLock(token, lease): BullMQ's lock renewal (its LockManager's call)
//   snapshot -> every job's state (wait/prioritized/delayed: pending, active: running, completed: done,
//               failed: uncertain), attemptsStarted, and the lease the adapter was answered
// The token of each hand-out is kept in Redis beside the queue (adapter bookkeeping, never read by BullMQ),
// so a finish names a generation and the adapter hands BullMQ that generation's token: what a Worker
// passes. A generation that was never handed out gets a token nobody holds.
//
// The clock. BullMQ's lease is a Redis key's expiry (PX), on the Redis server's clock; Date.now() only
// stamps jobs. Neither can be handed the contract's `now`. So the contract's lease *is* lockDuration: a
// claim or extend at `now` with lease L sets a lock that ends at now + L (its PX is what is left of real
// time until then), and stalledInterval keeps BullMQ's ratio to lockDuration (its defaults: 30 s and
// 30 s; --lock-duration and --stalled-interval set other production values, only their ratio counts).
// Real time must then stand for the contract's:
// - stress runs (`now` is the epoch: time.time() on this machine, the Redis server's clock too): as is;
// - scenarios (a logical clock, `now` = 0, 1, 31, ...): each call first waits (paced.js) until 0.1 real s per
//   logical second have passed since the run's first call (kept in Redis for every process; 0.1: the
//   scenarios' lease of 30 is a 3 s lock), so a lock runs out when the logical clock says.
// Faults that skew `now` (clock jumps) do not reach BullMQ's stalled checker: it reads the server's
// clock, as in production; they do set the lock's end, as a worker's skewed clock would not.
const crypto = require('node:crypto');
const Redis = require('ioredis');
const { Queue, Worker, Job, UnrecoverableError } = require('bullmq');
const { serve, logOnce } = require('./protocol');
const { PacedClock } = require('./paced');
const { checkLease, checkTaskId, checkOutcome } = require('./checks');

const QUEUE = 'takeover';
const REFUSED = new Set([-1, -2, -3, -6]); // JobNotExist, JobLockNotExist, JobNotInState, JobLockMismatch
const TOKENS = 'takeover:bullmq:tokens'; // hash: "task generation" -> token
const LEASES = 'takeover:bullmq:leases'; // hash: task -> the lease_until last answered

function options(argv) {
  const opts = { lockDuration: 30000, stalledInterval: 30000, maxStalledCount: 1 };
  const names = { '--lock-duration': 'lockDuration', '--stalled-interval': 'stalledInterval',
    '--max-stalled-count': 'maxStalledCount' };
  for (let i = 0; i < argv.length; i += 2) {
    const name = names[argv[i]];
    const value = Number(argv[i + 1]);
    if (!name || !Number.isInteger(value) || value < 0) {
      process.stderr.write(`bullmq.js: usage: [--lock-duration MS] [--stalled-interval MS] [--max-stalled-count N]; got ${argv.slice(i, i + 2).join(' ')}\n`);
      process.exit(2);
    }
    opts[name] = value;
  }
  return opts;
}

const SETTINGS = options(process.argv.slice(2));

// BullMQ's states as the contract's: wait, paused, prioritized, delayed: pending; active: running;
// completed: done; failed: uncertain (never fetched again). Markers ("0:...") are not jobs.
const SNAPSHOT = `
local out = {}
local function add(ids, state)
  for _, id in ipairs(ids) do
    if string.sub(id, 1, 2) ~= '0:' then
      local h = redis.call('HMGET', ARGV[1] .. id, 'data', 'ats', 'timestamp')
      out[#out + 1] = id
      out[#out + 1] = state
      out[#out + 1] = h[1] or '{}'
      out[#out + 1] = h[2] or '0'
      out[#out + 1] = h[3] or '0'
    end
  end
end
add(redis.call('LRANGE', KEYS[1], 0, -1), 'pending')
add(redis.call('LRANGE', KEYS[2], 0, -1), 'pending')
add(redis.call('ZRANGE', KEYS[3], 0, -1), 'pending')
add(redis.call('ZRANGE', KEYS[4], 0, -1), 'pending')
add(redis.call('LRANGE', KEYS[5], 0, -1), 'running')
add(redis.call('ZRANGE', KEYS[6], 0, -1), 'done')
add(redis.call('ZRANGE', KEYS[7], 0, -1), 'uncertain')
return out
`;

class BullMQQueue {
  static async open(url) {
    if (!url || !url.startsWith('redis://')) throw new Error(`bullmq.js takes a redis:// URL (--db redis), got ${url}`);
    const q = new BullMQQueue();
    q.client = new Redis(url, { maxRetriesPerRequest: null, lazyConnect: true });
    q.client.on('error', logOnce('bullmq.js')); // reconnects on its own
    await q.client.connect();
    q.queue = new Queue(QUEUE, { connection: q.client });
    q.queue.on('error', logOnce('bullmq queue'));
    // The Worker is made here, not at the first claim, so that its setup (a second, blocking connection)
    // is not inside the first lease; lockDuration and stalledInterval are set per call (both are read
    // from its options at each call).
    q.worker = new Worker(QUEUE, null, {
      connection: q.client, autorun: false, lockDuration: SETTINGS.lockDuration,
      stalledInterval: SETTINGS.stalledInterval, maxStalledCount: SETTINGS.maxStalledCount,
    });
    q.worker.on('error', logOnce('bullmq worker'));
    await q.worker.waitUntilReady();
    q.clock = new PacedClock('takeover:bullmq:epoch', (k, v) => q.client.set(k, v, 'NX'), (k) => q.client.get(k));
    q.id = crypto.randomBytes(6).toString('hex');
    q.tokens = 0;
    return q;
  }

  async pace(now) {
    await this.clock.wait(now);
  }

  // The lock's PX for a lease of `lease` contract seconds from `now`: what is left of real time until the
  // moment that stands for now + lease (the machine's clock in stress runs, where it is the harness's; the
  // paced clock in scenarios), so that the lock ends when the contract's lease does. The script that sets
  // it runs a round trip later: the lock outlives the lease by that round trip (docs/analyses/bullmq.md).
  lockMs(now, lease) {
    return Math.max(1, Math.round(this.clock.realMs(now, now + lease) - Date.now()));
  }

  // The Worker set for a lease of `lockDuration` real ms: stalledInterval keeps BullMQ's ratio to it.
  workerFor(lockDuration, lease, now) {
    const w = this.worker;
    w.opts.lockDuration = lockDuration;
    const real = this.clock.scale(now, lease);
    w.opts.stalledInterval = Math.max(1, Math.round(SETTINGS.stalledInterval * real / SETTINGS.lockDuration));
    return w;
  }

  async register(taskId, now) {
    await this.registerMany([taskId], now);
  }

  async registerMany(taskIds, now) {
    taskIds.forEach(checkTaskId);
    await this.pace(now);
    await this.queue.addBulk(taskIds.map((t) => ({ name: 'task', data: { task_id: t }, opts: { jobId: t } })));
  }

  async claim(worker, now, lease) {
    checkLease(lease);
    await this.pace(now);
    const w = this.workerFor(this.lockMs(now, lease), lease, now);
    await w.moveStalledJobsToWait();
    this.tokens += 1;
    const token = `${this.id}:${this.tokens}`;
    let job = await w.getNextJob(token, { block: false });
    // A job the stalled checker marked for failure (stalled more than maxStalledCount times: `defa`) is
    // failed at once by the Worker that fetches it, which then fetches the next (worker.js processJob,
    // getUnrecoverableErrorMessage): so here.
    while (job && w.getUnrecoverableErrorMessage(job)) {
      await job.moveToFailed(new UnrecoverableError(w.getUnrecoverableErrorMessage(job)), token, false);
      job = await w.getNextJob(token, { block: false });
    }
    if (!job) return null;
    const generation = job.attemptsStarted;
    const until = now + lease;
    await this.client.multi().hset(TOKENS, `${job.id} ${generation}`, token).hset(LEASES, job.id, String(until)).exec();
    return [job.data.task_id, generation, until];
  }

  // The job and the token of its hand-out `generation` (a token nobody holds for one never handed out),
  // once `now` has come: what a worker has in hand when it completes or renews.
  async held(taskId, generation, now) {
    checkTaskId(taskId);
    await this.pace(now);
    const token = (await this.client.hget(TOKENS, `${taskId} ${generation}`)) || `unknown:${taskId}:${generation}`;
    return [await Job.fromId(this.queue, taskId), token];
  }

  async finish(taskId, generation, outcome, now) {
    checkOutcome(outcome);
    const [job, token] = await this.held(taskId, generation, now);
    if (!job) return false;
    try {
      if (outcome === 'done') await job.moveToCompleted({ outcome }, token, false);
      else await job.moveToFailed(new Error('uncertain'), token, false);
    } catch (err) {
      if (REFUSED.has(err.code)) return false;
      throw err;
    }
    return true;
  }

  async extend(taskId, generation, now, lease) {
    checkLease(lease);
    const [job, token] = await this.held(taskId, generation, now);
    if (!job) return false;
    if (Number(await job.extendLock(token, this.lockMs(now, lease))) !== 1) return false;
    const until = now + lease;
    await this.client.hset(LEASES, taskId, String(until));
    return until;
  }

  async snapshot() {
    const k = this.queue.keys;
    const flat = await this.client.eval(SNAPSHOT, 7, k.wait, k.paused, k.prioritized, k.delayed, k.active, k.completed,
      k.failed, k['']);
    const leases = await this.client.hgetall(LEASES);
    const rows = [];
    for (let i = 0; i < flat.length; i += 5) {
      const [id, state, data, ats, stamp] = flat.slice(i, i + 5);
      rows.push([JSON.parse(data).task_id, state, Number(ats), state === 'running' ? Number(leases[id]) : null,
        Number(stamp), id]);
    }
    rows.sort((a, b) => a[4] - b[4] || (a[5] < b[5] ? -1 : 1));
    return rows.map((r) => r.slice(0, 4));
  }

  async close() {
    await this.worker.close(true);
    await this.queue.close();
    await this.client.quit();
  }
}

// The library, as a bug report names it (`takeover replay --issue`, `takeover scenarios --file F --issue`).
const LIBRARY = {
  name: 'bullmq', version: require('bullmq/package.json').version, home: 'https://github.com/taskforcesh/bullmq',
  calls: {
    "register": "`queue.add(name, {task_id}, {jobId})`",
    "claim": "`worker.moveStalledJobsToWait()`, then `worker.getNextJob(token)` (lock for lockDuration = {lease} s)",
    "finish:done": "`job.moveToCompleted(result, token)`",
    "finish:uncertain": "`job.moveToFailed(err, token)` (one attempt)",
    "extend": "`job.extendLock(token, duration)` ({lease} s)",
    "snapshot": "`queue.getJobState(id)` and `job.attemptsStarted`",
  },
  states: { pending: "wait", running: "active", done: "completed", uncertain: "failed" },
};
serve({ library: LIBRARY, databases: ['redis'], register_many: true, extend: true }, (url) => BullMQQueue.open(url));
