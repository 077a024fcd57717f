"""``takeover tune``'s answer in the setting names of the Node libraries behind ``exec:`` adapters: BullMQ
(adapters/js/bullmq.js) and Bee-Queue (adapters/js/beequeue.js).

Why here, by file name: an ``exec:`` queue's factory lives in another process, so tune cannot ask it (as it asks
a Python adapter's ``library_settings``); takeover knows these two adapters by their file in the command, and
reads the options the command gives them, as arq's (takeover.adapters.arq). What each setting is, with
file:line into the pinned packages, is in docs/analyses/bullmq.md and docs/analyses/bee-queue.md:

- BullMQ: the contract's lease is ``lockDuration`` (the lock key's PX); the adapter keeps BullMQ's ratio of
  ``stalledInterval`` to it (its defaults 30000 and 30000, or the ``--lock-duration``/``--stalled-interval``
  given); BullMQ renews a lock every ``lockRenewTime`` (default ``lockDuration / 2``): the heartbeat;
  ``maxStalledCount`` is the adapter's ``--max-stalled-count`` (BullMQ's default 1 fails a job that stalls
  twice: the page's finding 2). A dead worker's job is taken back at the stalled checker's second pass after
  its lock ran out (finding 1): up to ``lockDuration + 2 x stalledInterval``.
- Bee-Queue: the lease is ``stallInterval``; a worker "phones home" every ``stallInterval / 2`` by itself (no
  separate setting); stalled jobs are taken back only by ``checkStalledJobs``, which its README says to call
  on an interval (the adapter's ``--check-stalled``); without it a stalled job waits for a worker to start.
"""

from __future__ import annotations

import math
import shlex

BULLMQ, BEE_QUEUE = "bullmq.js", "beequeue.js"


def _words(queue: str) -> list[str]:
    try:
        return shlex.split(queue.removeprefix("exec:"))
    except ValueError:
        return []


def library(queue: str) -> str | None:
    """Which of the two adapters an ``exec:`` queue runs (its command names the adapter's file), or None."""
    for word in _words(queue):
        name = word.rsplit("/", 1)[-1]
        if name in (BULLMQ, BEE_QUEUE):
            return name
    return None


def _option(queue: str, name: str, default: int) -> int:
    words = _words(queue)
    for i, word in enumerate(words[:-1]):
        if word == name and words[i + 1].isdigit():
            return int(words[i + 1])
    return default


def library_settings(queue: str, lease: float, heartbeat: float | None) -> list[str] | None:
    """The lease (production seconds) and heartbeat in the library's own names; None for another queue."""
    which = library(queue)
    if which == BULLMQ:
        return _bullmq(queue, lease, heartbeat)
    if which == BEE_QUEUE:
        return _bee_queue(queue, lease, heartbeat)
    return None


def _bullmq(queue: str, lease: float, heartbeat: float | None) -> list[str]:
    lock = max(1, math.ceil(lease * 1000))
    ratio = _option(queue, "--stalled-interval", 30000) / max(1, _option(queue, "--lock-duration", 30000))
    stalled = max(1, round(lock * ratio))
    count = _option(queue, "--max-stalled-count", 1)
    lines = [f"new Worker(name, processor, {{ lockDuration: {lock}, stalledInterval: {stalled}, "
             f"maxStalledCount: {count} }})"]  # fmt: skip
    if heartbeat is not None:
        lines.append(f"lockRenewTime: {max(1, math.floor(heartbeat * 1000))} (the heartbeat: BullMQ renews the lock "
                     "this often while the job runs)")  # fmt: skip
    else:
        lines.append("lockRenewTime: BullMQ renews the lock by itself (default lockDuration / 2); this lease was "
                     "tuned without renewal, for a worker whose event loop is blocked for the whole job")  # fmt: skip
    lines.append(f"a dead worker's job is taken back within lockDuration + 2 x stalledInterval = "
                 f"{(lock + 2 * stalled) / 1000:g} s (two passes of the stalled checker)")  # fmt: skip
    if count < 2:
        lines.append(f"maxStalledCount: {count} fails a job that stalls {count + 1} times, never to run again: "
                     "raise it where a job must not be failed for its workers' stalls")  # fmt: skip
    return lines


def _bee_queue(queue: str, lease: float, heartbeat: float | None) -> list[str]:
    ms = max(1, math.ceil(lease * 1000))
    lines = [f"new Queue(name, {{ stallInterval: {ms} }}): a job whose worker did not phone home for {ms} ms "
             "is stalled"]  # fmt: skip
    if "--check-stalled" in _words(queue):
        lines.append(f"queue.checkStalledJobs({ms}) on every worker (its README): stalled jobs go back to the queue")
    else:
        lines.append(f"queue.checkStalledJobs({ms}) on an interval (its README), or a stalled job waits for a "
                     "worker to start (the run had no such check)")  # fmt: skip
    if heartbeat is not None:
        lines.append(f"Bee-Queue phones home every stallInterval / 2 = {ms / 2000:g} s by itself, with no setting of "
                     f"its own: the {heartbeat:g} s heartbeat holds only where it is that half")  # fmt: skip
    return lines
