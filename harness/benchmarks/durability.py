"""``full_vs_normal``: what ``synchronous=FULL`` costs the reference queue against ``NORMAL``.

Why in the bench: a power loss undoes acknowledged commits under ``NORMAL`` and none under ``FULL``
(docs/howto/power-loss.md), and the price of ``FULL`` is one fsync of the WAL per commit, which depends on
the disk. The same claim+finish loop runs on both classes of the queue, in alternating turns, on fresh files in
the same folder, so the ratio says what durability costs on this machine's disk.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from takeover.benchmarks.queue_raw import FreshQueues, queue_pairs
from takeover.benchmarks.timing import Turns
from takeover.queues.sqlite_lease import SQLiteLeaseQueueFull

TURN = 100  # pairs per turn: FULL's fsync per commit makes a pair a few ms


def measure(pairs: int = 1000, repetitions: int = 5, turn: int = TURN) -> dict[str, Any]:
    """The ratio (FULL's pairs per second over NORMAL's: the median of alternating turns of ``turn`` pairs,
    ``pairs`` each per repetition, on fresh files) and both rates (medians)."""
    turns = Turns()
    size = min(turn, pairs)
    with FreshQueues(pairs + 2 * size + 10) as fresh:
        for _ in range(repetitions):
            full = fresh.track(SQLiteLeaseQueueFull(fresh.path()))
            turns.run(
                partial(queue_pairs, full, size), partial(queue_pairs, fresh.queue(), size), max(1, pairs // size)
            )
    return turns.figures("full_vs_normal", "full_pairs_per_s", "normal_pairs_per_s")
