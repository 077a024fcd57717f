"""``history_overhead``: claim+finish pairs per second with the history recorded, against without.

Why: the history must be complete (an invoke before every call, a completion after it, each one
``os.write`` so SIGKILL cannot lose it) and still cheap, or takeover would measure its own
recording instead of the queue. The candidate records exactly what a worker records for a pair
(claim invoke/ok, finish invoke/ok, same fields, same writer); the baseline makes the same queue
calls with nothing around them. Both run in one process on fresh queue files, in alternating turns
timed by the process's CPU time (the history's writes are system calls of this process: they are in it),
and the figure is the median of the turns' ratios (see :mod:`takeover.benchmarks.timing`).

Run it: ``python -m takeover.benchmarks.history_overhead [--pairs N] [--repetitions R]``.
"""

from __future__ import annotations

import argparse
import json
import time
from functools import partial
from typing import Any

from takeover._internal.history import HistoryWriter
from takeover.benchmarks.queue_raw import TURN, FreshQueues
from takeover.benchmarks.timing import CPU, Turns
from takeover.queues.sqlite_lease import SQLiteLeaseQueue

LEASE = 30.0


def recorded_pairs(queue: SQLiteLeaseQueue, hist: HistoryWriter, pairs: int) -> int:
    """What workloads/worker.py writes around a claim and a finish, minus the sleeps."""
    write, clock = hist.write, time.time
    for _ in range(pairs):
        now = clock()
        write("invoke", "claim", worker="w0", now=now, lease=LEASE)
        task, gen, until = queue.claim("w0", now, LEASE)  # type: ignore[misc]  # never None here (see queue_raw)
        write("ok", "claim", worker="w0", task=task, gen=gen, lease_until=until, now=now)
        now = clock()
        write("invoke", "finish", task=task, gen=gen, outcome="done", now=now)
        accepted = queue.finish(task, gen, "done", now)
        write("ok" if accepted else "fail", "finish", task=task, gen=gen, outcome="done", value="true")
    return pairs


def bare_pairs(queue: SQLiteLeaseQueue, pairs: int) -> int:
    clock = time.time
    for _ in range(pairs):
        task, gen, _until = queue.claim("w0", clock(), LEASE)  # type: ignore[misc]  # never None here
        queue.finish(task, gen, "done", clock())
    return pairs


def measure(pairs: int = 3000, repetitions: int = 5, turn: int = TURN) -> dict[str, Any]:
    """Return the ratio (recorded / bare) with its absolute figures: each repetition opens both on fresh
    queue files (and a fresh history) and times them in alternating turns of ``turn`` pairs, ``pairs`` each,
    by this process's CPU time (the wall-clock ratio beside it)."""
    turns = Turns(CPU)
    size = min(turn, pairs)
    with FreshQueues(pairs + 2 * size + 10) as fresh:
        for _ in range(repetitions):
            queue = fresh.queue()
            hist = fresh.track(HistoryWriter(fresh.dir / f"h{fresh.n}.jsonl", 1))
            turns.run(
                partial(recorded_pairs, queue, hist, size),
                partial(bare_pairs, fresh.queue(), size),
                max(1, pairs // size),
            )
    return turns.figures("history_overhead", "recorded_pairs_per_s", "bare_pairs_per_s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3000)
    parser.add_argument("--repetitions", type=int, default=5)
    args = parser.parse_args()
    print(json.dumps(measure(args.pairs, args.repetitions), indent=2))


if __name__ == "__main__":
    main()
