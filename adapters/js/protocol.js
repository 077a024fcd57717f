'use strict';
// takeover's queue contract over JSON lines (docs/reference/protocol.md), the adapter's side, for any queue
// in JavaScript: serve(hello, open) prints the hello line, opens the queue on TAKEOVER_DB, then answers
// each request on stdin, strictly in order, with {"id", "result"} or {"id", "error"} on stdout.
// Nothing else may be printed on stdout: logs go to stderr (takeover keeps them in the run folder).
//
// Why the reading is done by hand rather than with node's readline and process.stdout: a call through the
// bridge is a round trip between two processes, so what the adapter spends per line is paid on every
// claim and finish (bench bridge_vs_native). Lines are split out of stdin's chunks directly and answers
// written to fd 1 with one write(2) each. `{ blocking: true }` goes further for queues that need nothing
// of the event loop between requests (the reference queue: better-sqlite3 is synchronous, and a bare pg
// Client has no timers): stdin is read with a blocking read(2), so an answer's request wakes this process
// directly instead of through the event loop's epoll. Libraries that run timers of their own between
// requests (pg-boss's supervisor, graphile-worker's maintenance) must keep the event loop: the default.
const fs = require('node:fs');
const { StringDecoder } = require('node:string_decoder');

const OPS = {
  register: (q, r) => q.register(r.task_id, r.now).then(() => null),
  register_many: (q, r) => q.registerMany(r.task_ids, r.now).then(() => null),
  claim: (q, r) => q.claim(r.worker, r.now, r.lease),
  finish: (q, r) => q.finish(r.task_id, r.generation, r.outcome, r.now),
  extend: (q, r) => q.extend(r.task_id, r.generation, r.now, r.lease),
  snapshot: (q) => q.snapshot(),
  close: (q) => q.close().then(() => null),
};

const pause = new Int32Array(new SharedArrayBuffer(4));

// All of `text` and a newline on fd 1, however the pipe takes it (a snapshot's answer can exceed the pipe).
function writeLine(text) {
  const data = Buffer.from(text + '\n');
  let done = 0;
  while (done < data.length) {
    try {
      done += fs.writeSync(1, data, done, data.length - done);
    } catch (err) {
      if (err.code !== 'EAGAIN') throw err;
      Atomics.wait(pause, 0, 0, 1); // the pipe is full and non-blocking: takeover reads it shortly
    }
  }
}

function serve(hello, open, { blocking = false } = {}) {
  writeLine(JSON.stringify({ takeover: 1, ...hello }));
  const opened = open(process.env.TAKEOVER_DB);
  opened.catch(() => {}); // reported on the first request
  let closed = false;

  async function answer(line) {
    let request;
    try {
      request = JSON.parse(line);
    } catch (err) {
      process.stderr.write(`adapter: a request that is not JSON: ${line}\n`);
      process.exit(2);
    }
    const reply = { id: request.id };
    try {
      const op = OPS[request.op];
      if (!op) throw new Error(`unknown op ${JSON.stringify(request.op)}`);
      reply.result = await op(await opened, request);
      if (request.op === 'close') closed = true;
    } catch (err) {
      reply.error = String((err && err.message) || err);
    }
    writeLine(JSON.stringify(reply));
  }

  // stdin closed: takeover is done with us (or died); leave, closing the queue if nobody did.
  async function leave() {
    if (!closed) {
      try { await (await opened).close(); } catch (err) { /* nothing left to protect */ }
    }
    process.exit(0);
  }

  const decoder = new StringDecoder('utf8');
  let pending = '';
  // The complete lines of `chunk` (with what came before it), each handed to `each`.
  function lines(chunk, each) {
    pending += decoder.write(chunk);
    let start = 0;
    let end;
    while ((end = pending.indexOf('\n', start)) >= 0) {
      each(pending.slice(start, end));
      start = end + 1;
    }
    pending = pending.slice(start);
  }

  function readEvents() {
    let chain = Promise.resolve();
    process.stdin.on('data', (chunk) => lines(chunk, (line) => { chain = chain.then(() => answer(line)); }));
    process.stdin.on('end', () => chain.then(leave));
  }

  async function readBlocking() {
    const buffer = Buffer.allocUnsafe(65536);
    const queue = [];
    for (;;) {
      while (queue.length === 0) {
        let n;
        try {
          n = fs.readSync(0, buffer, 0, buffer.length, null);
        } catch (err) {
          if (err.code === 'EAGAIN') return readEvents(); // stdin is non-blocking after all: wait in the loop
          if (err.code !== 'EOF') throw err;
          n = 0;
        }
        if (n === 0) return leave();
        lines(buffer.subarray(0, n), (line) => queue.push(line));
      }
      await answer(queue.shift());
    }
  }

  if (blocking) {
    // Not before the queue is open: opening it (connecting, creating the schema) needs the event loop.
    opened.then(readBlocking, readBlocking);
  } else {
    readEvents();
  }
}

// A writer of a library's error events to stderr, each distinct line once: a client reconnecting to a server
// that is gone (the run's end) repeats the same error many times a second.
function logOnce(prefix) {
  const said = new Set();
  return (err) => {
    const line = `${prefix}: ${(err && err.message) || err}`;
    if (!said.has(line)) process.stderr.write(`${line}\n`);
    said.add(line);
  };
}

module.exports = { serve, logOnce };
