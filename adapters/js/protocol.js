'use strict';
// takeover's queue contract over JSON lines (docs/protocol.md), the adapter's side, for any queue in
// JavaScript: serve(hello, open) prints the hello line, opens the queue on TAKEOVER_DB, then answers
// each request on stdin, strictly in order, with {"id", "result"} or {"id", "error"} on stdout.
// Nothing else may be printed on stdout: logs go to stderr (takeover keeps them in the run folder).
const readline = require('node:readline');

const OPS = {
  register: (q, r) => q.register(r.task_id, r.now).then(() => null),
  register_many: (q, r) => q.registerMany(r.task_ids, r.now).then(() => null),
  claim: (q, r) => q.claim(r.worker, r.now, r.lease),
  finish: (q, r) => q.finish(r.task_id, r.generation, r.outcome, r.now),
  extend: (q, r) => q.extend(r.task_id, r.generation, r.now, r.lease),
  snapshot: (q) => q.snapshot(),
  close: (q) => q.close().then(() => null),
};

function serve(hello, open) {
  process.stdout.write(JSON.stringify({ takeover: 1, ...hello }) + '\n');
  const opened = open(process.env.TAKEOVER_DB);
  opened.catch(() => {}); // reported on the first request
  const input = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  let chain = Promise.resolve();
  let closed = false;
  input.on('line', (line) => {
    chain = chain.then(async () => {
      let request;
      try {
        request = JSON.parse(line);
      } catch (err) {
        process.stderr.write(`adapter: a request that is not JSON: ${line}\n`);
        process.exit(2);
      }
      const answer = { id: request.id };
      try {
        const op = OPS[request.op];
        if (!op) throw new Error(`unknown op ${JSON.stringify(request.op)}`);
        answer.result = await op(await opened, request);
        if (request.op === 'close') closed = true;
      } catch (err) {
        answer.error = String((err && err.message) || err);
      }
      process.stdout.write(JSON.stringify(answer) + '\n');
    });
  });
  // stdin closed: takeover is done with us (or died); leave, closing the queue if nobody did.
  input.on('close', () => {
    chain.then(async () => {
      if (!closed) {
        try { await (await opened).close(); } catch (err) { /* nothing left to protect */ }
      }
      process.exit(0);
    });
  });
}

module.exports = { serve };
