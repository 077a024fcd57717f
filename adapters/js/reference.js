'use strict';
// The reference lease queue in JavaScript behind the JSON-lines protocol (docs/reference/protocol.md), on
// the database takeover gives it in TAKEOVER_DB: a postgresql:// URL is PostgreSQL (postgres.js, `pg`), a
// redis:// URL Redis (redis.js, `ioredis`), anything else a SQLite file (sqlite.js, `better-sqlite3`). Each is
// the spec's semantics exactly, the statements (or Lua scripts) of takeover.queues.postgres_lease,
// takeover.queues.redis_lease and takeover.queues.sqlite_lease. Proof that the bridge adds no false alarm: it
// passes the scenarios and stays VALID under stress on each.
// `--queue "exec:node adapters/js/reference.js"` (with --db postgres or --db redis for those)
const { serve } = require('./protocol');

const HELLO = { databases: ['sqlite', 'postgres', 'redis'], extend: true, register_many: true };

function isPostgres(database) {
  return /^postgres(ql)?:\/\//.test(database || '');
}

function isRedis(database) {
  return /^redis:\/\//.test(database || '');
}

// The queue on `database`; `finish` picks the finish statement of each database (planted.js plants a bug).
function open(database, finish = {}) {
  if (isRedis(database)) {
    const { RedisReferenceQueue, FINISH } = require('./redis');
    return RedisReferenceQueue.open(database, finish.redis || FINISH);
  }
  if (isPostgres(database)) {
    const { PostgresReferenceQueue, FINISH } = require('./postgres'); // loaded only for the database in use
    return PostgresReferenceQueue.open(database, finish.postgres || FINISH);
  }
  const { SQLiteReferenceQueue, FINISH } = require('./sqlite');
  return SQLiteReferenceQueue.open(database, finish.sqlite || FINISH);
}

// Blocking reads (protocol.js): neither SQL driver needs the event loop between two requests; ioredis does
// (its reconnection runs on timers), so on Redis the requests are read in the event loop.
if (require.main === module) {
  serve(HELLO, (database) => open(database), { blocking: !isRedis(process.env.TAKEOVER_DB) });
}

module.exports = { HELLO, open, isRedis };
