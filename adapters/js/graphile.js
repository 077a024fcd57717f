'use strict';
// graphile-worker 0.17 behind takeover's JSON-lines protocol (docs/reference/protocol.md): translation only.
//
//   --queue "exec:node adapters/js/graphile.js" --db postgres
//
// Each contract call is the call graphile-worker's own worker makes, through its own functions:
//   register -> addJob('takeover', {task_id}, {jobKey: task_id, jobKeyMode: 'unsafe_dedupe'}) (a live job
//               with that key is left alone)
//   claim    -> batchGetJobs (src/sql/getJobs.ts), locked by this process's pool id; generation = the
//               job's attempts (raised by every fetch); lease_until = locked_at + 4 hours, on the database
//               server's clock: a locked job is taken again only once resetLockedAt finds it locked for
//               4 hours (fixed, not settable)
//   finish   -> done: batchCompleteJobs (deletes the job by id); uncertain: batchFailJobs (graphile's
//               only outcome for a failed attempt: retried after a back-off). Accepted when the task's
//               job existed: graphile-worker's completion reports nothing.
//   snapshot -> the jobs; a finished job is deleted, so the adapter keeps the registered task ids (and the
//               generation a job had when it was completed) in a table of its own, for the snapshot alone.
// No extend: graphile-worker has no heartbeat.
const { getUtilsAndReleasersFromOptions } = require('graphile-worker/dist/lib');
const { batchGetJobs } = require('graphile-worker/dist/sql/getJobs');
const { batchCompleteJobs } = require('graphile-worker/dist/sql/completeJobs');
const { batchFailJobs } = require('graphile-worker/dist/sql/failJobs');
const { serve } = require('./protocol');

const TASK = 'takeover';
const LOCK_SECONDS = 4 * 60 * 60; // resetLockedAt: locked_at < now() - interval '4 hours'
const TASKS = { [TASK]: async () => {} };

const BOOKKEEPING = `CREATE TABLE IF NOT EXISTS takeover_tasks (
  seq BIGSERIAL, task_id TEXT PRIMARY KEY, done_generation INTEGER)`;
// The lease as the library keeps it: locked_at (a timestamp of the server's clock) + 4 hours, in seconds;
// the claim and the snapshot compute it alike from the same Date.
const leaseOf = (lockedAt) => lockedAt.getTime() / 1000 + LOCK_SECONDS;

const SNAPSHOT = `SELECT t.task_id, t.done_generation, j.attempts, j.max_attempts, j.last_error, j.locked_at,
    j.id IS NOT NULL AS live
  FROM takeover_tasks t LEFT JOIN graphile_worker._private_jobs j ON j.key = t.task_id ORDER BY t.seq`;

class GraphileQueue {
  static async open(url) {
    const [compiled, release] = await getUtilsAndReleasersFromOptions(
      { connectionString: url, maxPoolSize: 2, logger: undefined }, { scope: { label: 'takeover' } });
    const q = new GraphileQueue();
    q.compiled = compiled;
    q.release = release;
    q.pool = `takeover-${process.pid}`;
    await q.sql('SELECT pg_advisory_xact_lock(2053464065)'); // only orders the CREATE below
    await q.sql(BOOKKEEPING).catch(() => {}); // two processes at once: one of them made it
    return q;
  }

  sql(text, values = []) {
    return this.compiled.withPgClient((client) => client.query(text, values));
  }

  async register(taskId) {
    await this.sql('INSERT INTO takeover_tasks (task_id) VALUES ($1) ON CONFLICT DO NOTHING', [taskId]);
    await this.compiled.addJob(TASK, { task_id: taskId }, { jobKey: taskId, jobKeyMode: 'unsafe_dedupe' });
  }

  async registerMany(taskIds, now) {
    for (const taskId of taskIds) await this.register(taskId, now);
  }

  async claim(worker, now) {
    const [job] = await batchGetJobs(this.compiled, this.compiled.withPgClient, TASKS, this.pool, undefined, 1);
    return job ? [job.payload.task_id, job.attempts, leaseOf(job.locked_at)] : null;
  }

  async jobOf(taskId) {
    const { rows } = await this.sql(
      'SELECT id, job_queue_id, attempts FROM graphile_worker._private_jobs WHERE key = $1', [taskId]);
    return rows[0];
  }

  async finish(taskId, generation, outcome) {
    const job = await this.jobOf(taskId);
    if (!job) return false;
    if (outcome === 'done') {
      await this.sql('UPDATE takeover_tasks SET done_generation = $2 WHERE task_id = $1', [taskId, job.attempts]);
      await batchCompleteJobs(this.compiled, this.compiled.withPgClient, this.pool, [job]);
    } else {
      await batchFailJobs(this.compiled, this.compiled.withPgClient, this.pool, [{ job, message: 'uncertain' }]);
    }
    return true;
  }

  async snapshot() {
    const { rows } = await this.sql(SNAPSHOT);
    return rows.map((r) => {
      if (!r.live) return [r.task_id, 'done', r.done_generation ?? 0, null];
      if (r.locked_at !== null) return [r.task_id, 'running', r.attempts, leaseOf(r.locked_at)];
      return [r.task_id, r.attempts >= r.max_attempts ? 'uncertain' : 'pending', r.attempts, null];
    });
  }

  async close() {
    await this.release();
  }
}

// The library, as a bug report names it (`takeover replay --issue`, `takeover scenarios --file F --issue`).
const LIBRARY = {
  name: 'graphile-worker', version: require('graphile-worker/package.json').version, home: 'https://github.com/graphile/worker',
  calls: {
    "register": "`addJob('takeover', {task_id}, {jobKey, jobKeyMode: 'unsafe_dedupe'})`",
    "claim": "`batchGetJobs(...)` (the worker's fetch; the lock lasts 4 hours)",
    "finish:done": "`batchCompleteJobs(..., [job])`",
    "finish:uncertain": "`batchFailJobs(..., [{job, message}])`",
    "snapshot": "`SELECT attempts, locked_at FROM graphile_worker._private_jobs`",
  },
  states: { running: "locked" },
};
serve({ library: LIBRARY, databases: ['postgres'], register_many: true }, (url) => GraphileQueue.open(url));
