'use strict';
// The arguments the reference queues refuse, as takeover.queues.sqlite_lease does: SQLite stores NaN as
// NULL, so a NaN `now` would write a lease no claim can ever take over, or drop a registration silently.
function checkTime(name, value) {
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw new Error(`${name} must be a finite number of seconds, got ${JSON.stringify(value)}`);
  }
}

function checkLease(lease) {
  checkTime('lease', lease);
  // A lease that has run out when granted could never be finished (now < lease_until).
  if (lease <= 0) throw new Error(`lease must be positive, got ${lease}`);
}

function checkTaskId(taskId) {
  if (typeof taskId !== 'string' || !taskId) {
    throw new Error(`task_id must be a non-empty string, got ${JSON.stringify(taskId)}`);
  }
}

function checkOutcome(outcome) {
  if (outcome !== 'done' && outcome !== 'uncertain') {
    throw new Error(`outcome must be done or uncertain, got ${JSON.stringify(outcome)}`);
  }
}

module.exports = { checkTime, checkLease, checkTaskId, checkOutcome };
