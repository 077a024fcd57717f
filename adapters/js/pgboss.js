'use strict';
// pg-boss 10.4 behind takeover's JSON-lines protocol (docs/reference/protocol.md): translation only.
//
//   --queue "exec:node adapters/js/pgboss.js --expire 1" --db postgres --lease 1
//
// pg-boss has no lease passed at fetch time: a job's lease is its expireInSeconds, fixed when it is sent
// (an integer >= 1), so the adapter is told it (--expire, the run's --lease); a lease ends at started_on +
// expire_in, on the database server's clock, which the claim and the snapshot both report. Each contract
// call is the pg-boss call a worker makes:
//   register -> send(queue, {task_id}, {id}) (a job id derived from the task id: sending it again inserts
//               nothing, pg-boss's own ON CONFLICT DO NOTHING)
//   claim    -> fetch(queue, {includeMetadata}); generation = retryCount + 1 (pg-boss counts re-fetches)
//   finish   -> complete(queue, id, {outcome}) accepted when it affected the job; "uncertain" is recorded
//               as the completion's output, since fail() would retry the job
//   snapshot -> the queue's rows of pgboss.job, their states mapped (created/retry: pending, active:
//               running, completed: done or uncertain by its output, failed/cancelled: uncertain)
// Expiry is pg-boss's own: its supervisor (every process runs one, as every pg-boss instance does) fails
// expired active jobs into retry at its shortest interval, one second. No extend: pg-boss 10 has no
// heartbeat for a fetched job.
const crypto = require('node:crypto');
const PgBoss = require('pg-boss');
const { serve } = require('./protocol');

const QUEUE = 'takeover';
const args = process.argv.slice(2);
const expireAt = args.indexOf('--expire');
const EXPIRE = expireAt >= 0 ? Number(args[expireAt + 1]) : 1;

// A UUID from the task id (pg-boss ids are UUIDs): the same task, the same job.
function jobId(taskId) {
  const h = crypto.createHash('sha1').update(`takeover:${taskId}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-8${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

// started_on (a Date, milliseconds) + the expiry: the claim and the snapshot compute it alike.
const leaseOf = (startedOn) => startedOn.getTime() / 1000 + EXPIRE;

const SNAPSHOT = `SELECT data->>'task_id' AS task_id, state, retry_count, started_on, output->>'outcome' AS outcome
  FROM pgboss.job WHERE name = $1 ORDER BY created_on, id`;

function generationOf(row) {
  if (row.state === 'created') return 0;
  return row.retry_count + 1; // every fetch after the first raised retry_count (plans.js fetchNextJob)
}

function stateOf(row) {
  switch (row.state) {
    case 'created': case 'retry': return 'pending';
    case 'active': return 'running';
    case 'completed': return row.outcome === 'uncertain' ? 'uncertain' : 'done';
    default: return 'uncertain'; // failed, cancelled: never fetched again
  }
}

class PgBossQueue {
  static async open(url) {
    const boss = new PgBoss({
      connectionString: url, max: 2, schedule: false, supervise: true, maintenanceIntervalSeconds: 1,
      expireInSeconds: EXPIRE, retryLimit: 1000000, retryDelay: 0, retryBackoff: false,
    });
    boss.on('error', (err) => process.stderr.write(`pg-boss: ${err.message}\n`));
    await boss.start();
    await boss.createQueue(QUEUE).catch(() => {}); // another process may have created it first
    const q = new PgBossQueue();
    q.boss = boss;
    return q;
  }

  async register(taskId) {
    await this.boss.send(QUEUE, { task_id: taskId }, { id: jobId(taskId) });
  }

  async registerMany(taskIds) {
    await this.boss.insert(taskIds.map((t) => ({ name: QUEUE, id: jobId(t), data: { task_id: t } })));
  }

  async claim(worker, now) {
    const [job] = await this.boss.fetch(QUEUE, { includeMetadata: true });
    return job ? [job.data.task_id, job.retryCount + 1, leaseOf(job.startedOn)] : null;
  }

  async finish(taskId, generation, outcome) {
    const result = await this.boss.complete(QUEUE, jobId(taskId), { outcome });
    return result.affected === 1;
  }

  async snapshot() {
    const { rows } = await this.boss.getDb().executeSql(SNAPSHOT, [QUEUE]);
    return rows.map((r) => [r.task_id, stateOf(r), generationOf(r), r.state === 'active' ? leaseOf(r.started_on) : null]);
  }

  async close() {
    await this.boss.stop({ graceful: false, wait: true });
  }
}

// The library, as a bug report names it (`takeover replay --issue`, `takeover scenarios --file F --issue`).
const LIBRARY = {
  name: 'pg-boss', version: require('pg-boss/package.json').version, home: 'https://github.com/timgit/pg-boss',
  calls: {
    "register": "`boss.send(name, {task_id}, {id})`",
    "claim": "`boss.fetch(name)` (the job's expireInSeconds is its lease)",
    "finish:done": "`boss.complete(name, id, {outcome: 'done'})`",
    "finish:uncertain": "`boss.complete(name, id, {outcome: 'uncertain'})`",
    "snapshot": "`SELECT state, retry_count, started_on FROM pgboss.job`",
  },
  states: { pending: "created", running: "active", done: "completed" },
};
serve({ library: LIBRARY, databases: ['postgres'], register_many: true }, (url) => PgBossQueue.open(url));
