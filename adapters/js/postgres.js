'use strict';
// The reference lease queue in JavaScript on PostgreSQL with `pg`: the spec's semantics exactly, as
// takeover.queues.postgres_lease has them (each statement is the same one). reference.js serves it.
const { Client } = require('pg');
const { checkTime, checkLease, checkOutcome } = require('./checks');

const SCHEMA = [
  `CREATE TABLE IF NOT EXISTS tasks (
     seq BIGSERIAL NOT NULL, task_id TEXT PRIMARY KEY,
     state TEXT NOT NULL CHECK (state IN ('pending', 'running', 'done', 'uncertain')),
     generation INTEGER NOT NULL DEFAULT 0, lease_until DOUBLE PRECISION, worker TEXT,
     registered DOUBLE PRECISION NOT NULL)`,
  "CREATE INDEX IF NOT EXISTS tasks_pending ON tasks (seq) WHERE state = 'pending'",
  "CREATE INDEX IF NOT EXISTS tasks_running ON tasks (lease_until) WHERE state = 'running'",
];
const SCHEMA_LOCK = 0x7a6b0001; // the Python reference's: two processes creating the table take turns

// One statement: the row one of the picks locked (expired leases first, then pending in order).
const CLAIM = `UPDATE tasks SET state = 'running', generation = generation + 1, lease_until = $2, worker = $3
  WHERE task_id = COALESCE(
    (SELECT task_id FROM tasks WHERE state = 'running' AND lease_until <= $1
       ORDER BY lease_until LIMIT 1 FOR UPDATE SKIP LOCKED),
    (SELECT task_id FROM tasks WHERE state = 'pending' ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED))
  RETURNING task_id, generation, lease_until`;
// Fenced: this generation, still running, lease not yet run out on the caller's clock.
const FINISH = `UPDATE tasks SET state = $1, lease_until = NULL WHERE task_id = $2 AND generation = $3
  AND state = 'running' AND $4 < lease_until`;
const EXTEND = `UPDATE tasks SET lease_until = GREATEST(lease_until, $1) WHERE task_id = $2 AND generation = $3
  AND state = 'running' AND $4 < lease_until RETURNING lease_until`;
const REGISTER = `INSERT INTO tasks (task_id, state, generation, registered) VALUES ($1, 'pending', 0, $2)
  ON CONFLICT (task_id) DO NOTHING`;
const REGISTER_MANY = `INSERT INTO tasks (task_id, state, generation, registered)
  SELECT t, 'pending', 0, $2 FROM unnest($1::text[]) WITH ORDINALITY AS batch(t, n) ORDER BY n
  ON CONFLICT (task_id) DO NOTHING`;
const SNAPSHOT = 'SELECT task_id, state, generation, lease_until FROM tasks ORDER BY seq';

// Statements are prepared once per connection (named), as psycopg prepares the Python reference's after a
// few executions: the two queues then differ in the language and the bridge, not in the server's work.
class PostgresReferenceQueue {
  constructor(client, finishStatement) {
    this.client = client;
    this.finishStatement = finishStatement;
  }

  static async open(url, finishStatement = FINISH) {
    const client = new Client({ connectionString: url });
    await client.connect();
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock($1)', [SCHEMA_LOCK]);
    for (const statement of SCHEMA) await client.query(statement);
    await client.query('COMMIT');
    return new PostgresReferenceQueue(client, finishStatement);
  }

  async register(taskId, now) {
    checkTime('now', now);
    await this.client.query({ name: 'register', text: REGISTER, values: [taskId, now] });
  }

  async registerMany(taskIds, now) {
    checkTime('now', now);
    await this.client.query(REGISTER_MANY, [taskIds, now]);
  }

  async claim(worker, now, lease) {
    checkTime('now', now);
    checkLease(lease);
    const { rows } = await this.client.query({ name: 'claim', text: CLAIM, values: [now, now + lease, worker] });
    return rows.length ? [rows[0].task_id, rows[0].generation, rows[0].lease_until] : null;
  }

  async finish(taskId, generation, outcome, now) {
    checkOutcome(outcome);
    checkTime('now', now);
    const { rowCount } = await this.client.query({
      name: 'finish', text: this.finishStatement, values: [outcome, taskId, generation, now] });
    return rowCount === 1;
  }

  async extend(taskId, generation, now, lease) {
    checkTime('now', now);
    checkTime('lease', lease);
    const { rows } = await this.client.query({ name: 'extend', text: EXTEND, values: [now + lease, taskId, generation, now] });
    return rows.length ? rows[0].lease_until : false;
  }

  async snapshot() {
    const { rows } = await this.client.query(SNAPSHOT);
    return rows.map((r) => [r.task_id, r.state, r.generation, r.lease_until]);
  }

  async close() {
    await this.client.end();
  }
}

module.exports = { PostgresReferenceQueue, FINISH };
