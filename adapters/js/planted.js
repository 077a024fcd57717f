'use strict';
// The reference queue with one planted bug: an unfenced finish. It completes a task by id while the
// task is running, whatever the generation and the lease say (as pg-boss completes a job by id), so a
// holder whose lease ran out and whose task was claimed again still finishes it. takeover must catch it.
// `--queue "exec:node adapters/js/planted.js" --db postgres`
const { serve } = require('./protocol');
const { ReferenceQueue, HELLO } = require('./reference');

const UNFENCED_FINISH = "UPDATE tasks SET state = $1, lease_until = NULL WHERE task_id = $2 AND state = 'running' " +
  'AND $3::int IS NOT NULL AND $4::float8 IS NOT NULL';

serve(HELLO, (url) => ReferenceQueue.open(url, UNFENCED_FINISH));
