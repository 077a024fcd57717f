"""What takeover says about arq in its own process: the adapter itself runs elsewhere.

arq 0.28.0 requires redis-py below 6, so its adapter (adapters/py/arq_adapter.py) runs in an environment of
its own (``.venv-arq``, ``make arq``) and speaks the JSON-lines protocol: ``--queue "exec:.venv-arq/bin/python
adapters/py/arq_adapter.py"``. An ``exec:`` queue's class lives in that other process, so what ``takeover
tune`` prints in the library's own setting names cannot be asked of it: it is here, found by the adapter's
file name in the command (:func:`library_settings_for`). docs/analyses/arq.md has the file:line references.
"""

from __future__ import annotations

import math
import shlex

ADAPTER = "arq_adapter.py"  # the file name in the exec: command that makes a queue arq's
MARGIN = 10  # arq's in-progress key lives the longest job timeout + 10 s (worker.py:276-277)
MAX_TRIES = 5  # arq's Worker default (worker.py:209)


def is_arq(queue: str) -> bool:
    """Whether an ``exec:`` queue runs the arq adapter (its command names the adapter's file)."""
    try:
        words = shlex.split(queue.removeprefix("exec:"))
    except ValueError:
        return False
    return any(word.rsplit("/", 1)[-1] == ADAPTER for word in words)


def library_settings(lease: float, heartbeat: float | None) -> list[str]:
    """``takeover tune``'s lease (production seconds) in arq's settings. The lease is the in-progress key's TTL,
    ``in_progress_timeout_s`` = the longest job timeout of the worker's functions + 10 s (worker.py:276-277),
    set once when a job starts (:465) and never renewed; inside it arq cancels the job at its own timeout."""
    timeout = math.floor(lease) - MARGIN
    if timeout < 1:
        return [f"arq cannot hold a job for only {lease:g} s: its in-progress key lives job_timeout + 10 s, at "
                "least 11 s (job_timeout=1); its takeovers come no sooner"]  # fmt: skip
    lines = [
        f"Worker(job_timeout={timeout}) (WorkerSettings.job_timeout = {timeout}): an in-progress key of "
        f"{timeout + MARGIN} s; every func(..., timeout=...) of the worker at most {timeout} s too (the longest "
        "one sets every job's key)",
        f"expires_extra_ms above {MAX_TRIES} x {timeout + MARGIN} s plus the longest wait in the queue "
        f"({1000 * MAX_TRIES * (timeout + MARGIN)} ms and more; default 86400000): a job started again after its "
        "job key expired is failed ('job expired'), not run",
        "keep_result (default 3600 s) longer than a producer may enqueue the same _job_id again: until the result "
        "clears, arq refuses the id",
    ]
    if heartbeat is not None:
        lines.append("arq cannot renew a job's in-progress key (no heartbeat): use the fixed-lease recommendation")
    return lines
