"""``watched_vs_plain``: what the statement hook of ``freeze_in_call`` costs a worker's claim and finish.

Why: with ``--freeze-in-call-rate`` on, every statement of every call a worker makes goes through
the hook's callback (:mod:`takeover._internal.failpoints`), and every call through the worker's wrapper, which
reads the phase board for an armed freeze (:mod:`takeover._internal.run.freeze_in_call`). Nearly all of
those calls have nothing armed, and must then cost next to nothing, or the fault would slow the
very runs it is meant to sharpen. The candidate is the reference queue opened and called exactly as
a worker does with the fault on (nothing armed); the baseline the same queue opened plainly; both
claim and finish the same pairs on fresh files (takeover.benchmarks.queue_raw).
"""

from __future__ import annotations

import multiprocessing
import os
import tempfile
from functools import partial
from typing import Any

from takeover._internal.history import HistoryWriter
from takeover._internal.run.freeze_in_call import CallFreezer
from takeover._internal.run.phases import PhaseBoard
from takeover.benchmarks.queue_raw import TURN, FreshQueues, queue_pairs
from takeover.benchmarks.timing import Turns
from takeover.queues.sqlite_lease import SQLiteLeaseQueue


def measure(pairs: int = 3000, repetitions: int = 5) -> dict[str, Any]:
    board = PhaseBoard.create(multiprocessing.get_context("spawn"), 1)
    fd, history = tempfile.mkstemp(prefix="takeover-bench-", suffix=".jsonl")
    os.close(fd)
    try:
        with FreshQueues(pairs + 2 * TURN + 10) as fresh:
            hist = fresh.track(HistoryWriter(history, 1))

            def watched() -> SQLiteLeaseQueue:
                path = fresh.path()
                queue = CallFreezer(board, 0, hist, "w0").open(lambda: SQLiteLeaseQueue(path))
                fresh.track(queue)
                return queue

            turns = Turns()
            size = min(TURN, pairs)
            for _ in range(repetitions):
                turns.run(
                    partial(queue_pairs, watched(), size),
                    partial(queue_pairs, fresh.queue(), size),
                    max(1, pairs // size),
                )
    finally:
        os.unlink(history)
    return turns.figures("watched_vs_plain", "watched_pairs_per_s", "plain_pairs_per_s")


if __name__ == "__main__":
    print(measure())
