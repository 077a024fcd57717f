'use strict';
// Real time standing for the contract's `now`, for libraries whose lease is a Redis key's expiry on the
// server's clock (bullmq.js, beequeue.js): no `now` can be handed to them, so real time must pass.
// - Stress runs: `now` is the epoch (time.time() on this machine, the Redis server's clock too): as is.
// - Scenarios: a logical clock (`now` = 0, 1, 31, ...): PACE real seconds stand for one logical second
//   from the run's first call, whose (logical, real) start is kept in Redis so that every process of the
//   run (each actor may be one) reads the same clock; each call first waits until its `now` has come.
const { checkTime } = require('./checks');

const PACE = 0.1; // real seconds per logical second
const LOGICAL = 1e8; // a `now` below this is a logical clock (the epoch is 1.7e9)

class PacedClock {
  // setNx(key, value) and get(key): the library's own Redis client's, as promises.
  constructor(key, setNx, get) {
    Object.assign(this, { key, setNx, get, start: null });
  }

  // Wait until real time stands at `now`.
  async wait(now) {
    checkTime('now', now);
    if (now >= LOGICAL) return;
    if (this.start === null) {
      await this.setNx(this.key, `${now} ${Date.now()}`);
      this.start = (await this.get(this.key)).split(' ').map(Number);
    }
    const wait = this.realMs(now, now) - Date.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  }

  // The real time (ms since the epoch) that stands for contract time `t`, on the clock of a call at `now`.
  realMs(now, t) {
    return now >= LOGICAL ? t * 1000 : this.start[1] + (t - this.start[0]) * PACE * 1000;
  }

  // Real ms of `seconds` contract seconds, on the clock of a call at `now`.
  scale(now, seconds) {
    return seconds * 1000 * (now >= LOGICAL ? 1 : PACE);
  }
}

module.exports = { PacedClock };
