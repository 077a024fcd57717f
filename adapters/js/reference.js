'use strict';
// The reference lease queue in JavaScript behind the JSON-lines protocol (docs/reference/protocol.md), on
// the database takeover gives it in TAKEOVER_DB: a postgresql:// URL is PostgreSQL (postgres.js, `pg`),
// anything else a SQLite file (sqlite.js, `better-sqlite3`). Each is the spec's semantics exactly, the
// statements of takeover.queues.postgres_lease and takeover.queues.sqlite_lease. Proof that the bridge adds
// no false alarm: it passes the scenarios and stays VALID under stress on both.
// `--queue "exec:node adapters/js/reference.js"` (with --db postgres for PostgreSQL)
const { serve } = require('./protocol');

const HELLO = { databases: ['sqlite', 'postgres'], extend: true, register_many: true };

function isPostgres(database) {
  return /^postgres(ql)?:\/\//.test(database || '');
}

// The queue on `database`; `finish` picks the finish statement of each database (planted.js plants a bug).
function open(database, finish = {}) {
  if (isPostgres(database)) {
    const { PostgresReferenceQueue, FINISH } = require('./postgres'); // loaded only for the database in use
    return PostgresReferenceQueue.open(database, finish.postgres || FINISH);
  }
  const { SQLiteReferenceQueue, FINISH } = require('./sqlite');
  return SQLiteReferenceQueue.open(database, finish.sqlite || FINISH);
}

// Blocking reads (protocol.js): neither driver needs the event loop between two requests.
if (require.main === module) serve(HELLO, (database) => open(database), { blocking: true });

module.exports = { HELLO, open };
