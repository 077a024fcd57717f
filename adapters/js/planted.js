'use strict';
// The reference queue with one planted bug: an unfenced finish. It completes a task by id while the
// task is running, whatever the generation and the lease say (as pg-boss completes a job by id), so a
// holder whose lease ran out and whose task was claimed again still finishes it. takeover must catch it,
// on each database. `--queue "exec:node adapters/js/planted.js"` (with --db postgres or --db redis)
const { serve } = require('./protocol');
const { HELLO, open, isRedis } = require('./reference');

// The same four parameters as the fenced finish (outcome, task, generation, now); the last two are ignored.
const UNFENCED_FINISH = {
  postgres: "UPDATE tasks SET state = $1, lease_until = NULL WHERE task_id = $2 AND state = 'running' " +
    'AND $3::int IS NOT NULL AND $4::float8 IS NOT NULL',
  sqlite: "UPDATE tasks SET state = ?, lease_until = NULL WHERE task_id = ? AND state = 'running' " +
    'AND ? IS NOT NULL AND ? IS NOT NULL',
  get redis() {
    return require('./redis').finishScript("s[1] == 'running'"); // the same script, without the fence
  },
};

serve(HELLO, (database) => open(database, UNFENCED_FINISH), { blocking: !isRedis(process.env.TAKEOVER_DB) });
