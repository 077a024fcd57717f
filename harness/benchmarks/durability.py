"""``full_vs_normal``: what ``synchronous=FULL`` costs the reference queue against ``NORMAL``.

Why in the bench: a power loss undoes acknowledged commits under ``NORMAL`` and none under ``FULL``
(docs/howto/power-loss.md), and the price of ``FULL`` is one fsync of the WAL per commit, which depends on
the disk. The same claim+finish loop runs on both classes of the queue, interleaved, on fresh files in
the same folder, so the ratio says what durability costs on this machine's disk.
"""

from __future__ import annotations

from functools import partial

from takeover.benchmarks.queue_raw import FreshQueues, queue_pairs
from takeover.benchmarks.timing import compare, ratio_figures
from takeover.queues.sqlite_lease import SQLiteLeaseQueue, SQLiteLeaseQueueFull


def measure(pairs: int = 1000, repetitions: int = 5) -> dict[str, float]:
    """The ratio (FULL's pairs per second over NORMAL's) and both rates (medians)."""
    with FreshQueues(pairs + 10) as fresh:
        full, normal = compare(
            lambda: partial(queue_pairs, fresh.track(SQLiteLeaseQueueFull(fresh.path())), pairs),
            lambda: partial(queue_pairs, fresh.track(SQLiteLeaseQueue(fresh.path())), pairs),
            repetitions=repetitions,
        )
    return ratio_figures("full_vs_normal", full, normal, "full_pairs_per_s", "normal_pairs_per_s")
