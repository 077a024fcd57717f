"""How long a frozen lease holder blocks the other workers on PostgreSQL (the private server's settings).

Why: on PostgreSQL a queue may hold a row lock across calls (a transaction opened at claim and committed
at finish, as some published queues do); a worker frozen (SIGSTOP) inside such a transaction keeps its
lock, and every other worker that wants that row waits, or, with SKIP LOCKED, does not see the task at
all, until the server ends the frozen session. Two measurements, each with the holder a real process
that is really stopped:

- ``reference``: the PostgreSQL reference queue, which holds no transaction across calls. The holder
  claims a task (lease ``LEASE`` s) and is frozen. Measured: the longest another worker's claim took
  while the holder was frozen (it must not wait for it), and how soon after the lease ran out the other
  worker took the task over (claims polled every ``POLL`` s).
- ``open_transaction``: the holder opens a transaction, locks the task's row ``FOR UPDATE`` and is
  frozen. Measured: how long another worker's ``SELECT ... FOR UPDATE`` of that row waits, and how long
  a ``FOR UPDATE SKIP LOCKED`` claim keeps missing it, both bounded by the server's
  ``idle_in_transaction_session_timeout``.

Run it: ``python -m takeover.benchmarks.frozen_holder`` (starts a private server, prints JSON);
``takeover bench --db postgres`` measures it too (bench.json's ``frozen_holder``; no target: the
figures are the server's setting, and the reference queue's not waiting).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from takeover._internal import db
from takeover._internal.db.server import IDLE_IN_TRANSACTION_TIMEOUT
from takeover.queues.postgres_lease import PostgresLeaseQueue

LEASE = 1.0
POLL = 0.01

_CLAIM_AND_WAIT = """
import sys, time
from takeover.queues.postgres_lease import PostgresLeaseQueue
q = PostgresLeaseQueue(sys.argv[1])
print(repr(q.claim("frozen", time.time(), float(sys.argv[2]))), flush=True)
time.sleep(3600)
"""
_LOCK_AND_WAIT = """
import sys, time, psycopg
conn = psycopg.connect(sys.argv[1])
conn.execute("SELECT task_id FROM tasks WHERE task_id = 't0' FOR UPDATE")
print("locked", flush=True)
time.sleep(3600)
"""


def _frozen(script: str, *args: str) -> tuple[subprocess.Popen[str], str]:
    """A holder process that did its part, then was stopped (SIGSTOP); and what it printed."""
    proc = subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    os.kill(proc.pid, signal.SIGSTOP)
    return proc, line


def _end(proc: subprocess.Popen[str]) -> None:
    proc.kill()
    os.kill(proc.pid, signal.SIGCONT)
    proc.wait()


def reference(url: str) -> dict[str, Any]:
    queue = PostgresLeaseQueue(url)
    try:
        queue.register_many(["t0", "t1", "t2", "t3"], time.time())
        holder, line = _frozen(_CLAIM_AND_WAIT, url, str(LEASE))
        try:
            claimed = eval(line)  # noqa: S307 - the repr of a tuple our own child printed
            expires = float(claimed[2])
            longest = 0.0
            took_over = None
            while time.time() < expires + 5:
                t0 = time.perf_counter()
                got = queue.claim("other", time.time(), 60.0)
                longest = max(longest, time.perf_counter() - t0)
                if got is not None and got[0] == claimed[0]:
                    took_over = time.time() - expires
                    break
                time.sleep(POLL)
        finally:
            _end(holder)
    finally:
        queue.close()
    return {"longest_claim_while_frozen_ms": round(1000 * longest, 1),
            "takeover_after_expiry_ms": None if took_over is None else round(1000 * took_over, 1)}


def open_transaction(url: str, wait_too: bool = True) -> dict[str, Any]:
    """``wait_too``: also measure a blocking ``FOR UPDATE`` (a second frozen holder, a second timeout)."""
    from takeover._internal.db import postgres

    queue = PostgresLeaseQueue(url)
    queue.register_many(["t0"], time.time())
    queue.close()
    holder, _ = _frozen(_LOCK_AND_WAIT, url)
    try:
        with postgres.connect(url) as skipper:
            started = time.monotonic()
            skipped_until = None
            while time.monotonic() - started < 30:
                row = skipper.execute("SELECT task_id FROM tasks WHERE task_id = 't0' FOR UPDATE SKIP LOCKED"
                                      ).fetchone()
                if row is not None:
                    skipped_until = time.monotonic() - started
                    break
                time.sleep(POLL)
        waited = _blocked_for_update(url) if wait_too else None
    finally:
        _end(holder)
    return {"skip_locked_missed_s": None if skipped_until is None else round(skipped_until, 2),
            "for_update_waited_s": None if waited is None else round(waited, 2),
            "idle_in_transaction_session_timeout": IDLE_IN_TRANSACTION_TIMEOUT}


def _blocked_for_update(url: str) -> float:
    """The row is free again only once the frozen session was ended: a second frozen holder, and how long a
    plain ``FOR UPDATE`` of its row waits for it."""
    from takeover._internal.db import postgres

    holder, _ = _frozen(_LOCK_AND_WAIT, url)
    try:
        with postgres.connect(url) as waiter:
            t0 = time.monotonic()
            with waiter.transaction():
                waiter.execute("SELECT task_id FROM tasks WHERE task_id = 't0' FOR UPDATE")
            return time.monotonic() - t0
    finally:
        _end(holder)


def measure() -> dict[str, Any]:
    """On the PostgreSQL server being served (``takeover bench --db``), else on a private one."""
    value = db.current().value if db.current().kind == db.POSTGRES else db.POSTGRES
    with db.serve(value) as host, tempfile.TemporaryDirectory() as tmp:
        with host.database(Path(tmp), "frozen_ref") as url:
            ref = reference(url)
        with host.database(Path(tmp), "frozen_tx") as url:
            tx = open_transaction(url)
    return {"reference": ref, "open_transaction": tx}


if __name__ == "__main__":
    print(json.dumps(measure(), indent=2))
