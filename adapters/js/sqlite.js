'use strict';
// The reference lease queue in JavaScript on SQLite with `better-sqlite3`: the spec's semantics exactly, as
// takeover.queues.sqlite_lease has them (each statement is the same one), so the two differ in the language
// and the bridge only. What the Python queue does, this does, for the same reasons:
// - WAL with synchronous=NORMAL; set-up (the WAL switch, the schema) retried while another process holding
//   the file makes it fail at once with "database is locked" (takeover.sqlite_util.open_wal);
// - every write is one transaction that takes the write lock up front (BEGIN IMMEDIATE), so two processes
//   can never read the same claimable row and both take it;
// - waiting for that lock in short steps of our own (50 us doubling to 1 ms, 10 s in all) rather than
//   SQLite's busy handler, which sleeps whole milliseconds for a lock held ~50 us (busy_timeout=0 once set
//   up; takeover.sqlite_util.begin_immediate);
// - finish and extend fenced by the generation, the state and the lease on the caller's clock.
const Database = require('better-sqlite3');
const { checkTime, checkLease, checkTaskId, checkOutcome } = require('./checks');

const SCHEMA = [
  `CREATE TABLE IF NOT EXISTS tasks (
     task_id     TEXT PRIMARY KEY,
     state       TEXT NOT NULL CHECK (state IN ('pending', 'running', 'done', 'uncertain')),
     generation  INTEGER NOT NULL DEFAULT 0,
     lease_until REAL,
     worker      TEXT,
     registered  REAL NOT NULL)`,
  'CREATE INDEX IF NOT EXISTS tasks_by_state ON tasks (state, lease_until)',
];
// Expired leases first (oldest expiry first), then pending tasks in registration order (the index keeps
// equal entries in rowid order, so no ORDER BY: see sqlite_lease.py's _PICK_PENDING).
const PICK_EXPIRED = "SELECT task_id FROM tasks INDEXED BY tasks_by_state WHERE state = 'running' " +
  'AND lease_until <= ? ORDER BY lease_until LIMIT 1';
const PICK_PENDING = "SELECT task_id FROM tasks INDEXED BY tasks_by_state WHERE state = 'pending' LIMIT 1";
const TAKE = "UPDATE tasks SET state = 'running', generation = generation + 1, lease_until = ?, worker = ? " +
  'WHERE task_id = ? RETURNING generation, lease_until';
const EXTEND = 'UPDATE tasks SET lease_until = MAX(lease_until, ?) ' +
  "WHERE task_id = ? AND generation = ? AND state = 'running' AND ? < lease_until RETURNING lease_until";
// Fenced: this generation, still running, lease not yet run out on the caller's clock.
const FINISH = 'UPDATE tasks SET state = ?, lease_until = NULL ' +
  "WHERE task_id = ? AND generation = ? AND state = 'running' AND ? < lease_until";
const REGISTER = "INSERT OR IGNORE INTO tasks (task_id, state, generation, registered) VALUES (?, 'pending', 0, ?)";
const SNAPSHOT = 'SELECT task_id, state, generation, lease_until FROM tasks ORDER BY rowid';

const BUSY_TIMEOUT_MS = 10000;
const SETUP_DEADLINE_MS = 30000;
const SPIN_FIRST_MS = 0.05;
const SPIN_MAX_MS = 1;
const sleeper = new Int32Array(new SharedArrayBuffer(4));

function sleepMs(ms) {
  Atomics.wait(sleeper, 0, 0, ms); // a synchronous sleep: calls are answered one at a time anyway
}

function isBusy(err) {
  const code = String((err && err.code) || '');
  return code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED');
}

// fn(), retried with doubling sleeps from `delay` to `longest` ms while the file is busy, until `deadline`.
function retryWhileBusy(fn, deadline, delay, longest) {
  for (;;) {
    try {
      return fn();
    } catch (err) {
      if (!isBusy(err) || Date.now() > deadline) throw err;
    }
    sleepMs(delay);
    delay = Math.min(delay * 2, longest);
  }
}

class SQLiteReferenceQueue {
  constructor(path, finishStatement = FINISH) {
    const db = new Database(path, { timeout: BUSY_TIMEOUT_MS });
    this.db = db;
    const deadline = Date.now() + SETUP_DEADLINE_MS;
    const setWal = () => {
      if (String(db.pragma('journal_mode', { simple: true })).toLowerCase() === 'wal') return;
      const got = String(db.pragma('journal_mode = WAL', { simple: true })).toLowerCase();
      if (got === 'memory') throw new Error(`${JSON.stringify(path)} is an in-memory database; takeover needs a file shared by processes`);
      if (got !== 'wal') throw Object.assign(new Error(`database is locked (journal_mode stayed ${got})`), { code: 'SQLITE_BUSY' });
    };
    retryWhileBusy(setWal, deadline, 1, 50);
    db.pragma('synchronous = NORMAL');
    this.begin = db.prepare('BEGIN IMMEDIATE');
    this.commit = db.prepare('COMMIT');
    this.rollback = db.prepare('ROLLBACK');
    retryWhileBusy(() => this.write(() => { for (const statement of SCHEMA) db.exec(statement); }), deadline, 1, 50);
    db.pragma('busy_timeout = 0'); // from now on, the lock is waited for in short steps (beginImmediate)
    this.pickExpired = db.prepare(PICK_EXPIRED).pluck();
    this.pickPending = db.prepare(PICK_PENDING).pluck();
    this.take = db.prepare(TAKE).raw();
    this.finishStatement = db.prepare(finishStatement);
    this.extendStatement = db.prepare(EXTEND).pluck();
    this.registerStatement = db.prepare(REGISTER);
    this.snapshotStatement = db.prepare(SNAPSHOT).raw();
  }

  static async open(path, finishStatement) {
    return new SQLiteReferenceQueue(path, finishStatement);
  }

  beginImmediate() {
    try {
      this.begin.run();
    } catch (err) {
      if (!isBusy(err)) throw err;
      sleepMs(SPIN_FIRST_MS); // the lock was taken an instant ago: no point asking again at once
      retryWhileBusy(() => this.begin.run(), Date.now() + BUSY_TIMEOUT_MS, 2 * SPIN_FIRST_MS, SPIN_MAX_MS);
    }
  }

  // fn() in one transaction that holds the write lock from its start; committed, or rolled back if it throws.
  write(fn) {
    this.beginImmediate();
    let result;
    try {
      result = fn();
      this.commit.run();
    } catch (err) {
      if (this.db.inTransaction) this.rollback.run();
      throw err;
    }
    return result;
  }

  async register(taskId, now) {
    checkTaskId(taskId);
    checkTime('now', now);
    this.write(() => this.registerStatement.run(taskId, now));
  }

  async registerMany(taskIds, now) {
    taskIds.forEach(checkTaskId);
    checkTime('now', now);
    this.write(() => { for (const taskId of taskIds) this.registerStatement.run(taskId, now); });
  }

  async claim(worker, now, lease) {
    checkTime('now', now);
    checkLease(lease);
    return this.write(() => {
      const taskId = this.pickExpired.get(now) ?? this.pickPending.get();
      if (taskId === undefined) return null;
      const [generation, leaseUntil] = this.take.get(now + lease, worker, taskId);
      return [taskId, generation, leaseUntil];
    });
  }

  async finish(taskId, generation, outcome, now) {
    checkOutcome(outcome);
    checkTime('now', now);
    return this.write(() => this.finishStatement.run(outcome, taskId, generation, now).changes === 1);
  }

  async extend(taskId, generation, now, lease) {
    checkTaskId(taskId);
    checkTime('now', now);
    checkLease(lease);
    const until = this.write(() => this.extendStatement.get(now + lease, taskId, generation, now));
    return until === undefined ? false : until;
  }

  async snapshot() {
    return retryWhileBusy(() => this.snapshotStatement.all(), Date.now() + BUSY_TIMEOUT_MS, SPIN_FIRST_MS, SPIN_MAX_MS);
  }

  async close() {
    this.db.close();
  }
}

module.exports = { SQLiteReferenceQueue, FINISH };
