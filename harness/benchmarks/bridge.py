"""``bridge_vs_native``: the JavaScript reference queue through the JSON-lines bridge vs the Python one.

Both are the spec's reference queue, one transaction per call and the same statements
(adapters/js/postgres.js and takeover.queues.postgres_lease on PostgreSQL, adapters/js/sqlite.js and
takeover.queues.sqlite_lease on SQLite), each on a fresh database with its tasks registered; the timed
loop is claim+finish pairs through the contract's methods (queue_raw.queue_pairs), interleaved with the
native queue's in turns of a hundred pairs. The ratio is what going through another process costs: a
JSON line each way, a pipe, node and its driver. The per-call overhead is that cost per call in
microseconds: the difference of the two per-pair times, halved.

On PostgreSQL (``--db postgres``, the figure in every ``takeover bench --db postgres``) both queues also
wait for the server on every call, so the bridge's share is smaller; on SQLite (``takeover bench --only
bridge_vs_native``, asked for by name so that a plain ``takeover bench`` needs no node) the native call
is a few library calls in-process and the figure is close to the bridge's cost alone.
"""

from __future__ import annotations

import shutil
from functools import partial
from pathlib import Path
from typing import Any

from takeover._internal import db
from takeover.benchmarks import queue_raw
from takeover.benchmarks.timing import Turns
from takeover.contract import open_queue
from takeover.errors import UsageError

# The repository's adapters (an editable install: harness/ is takeover, adapters/ beside it).
JS_REFERENCE = Path(__file__).resolve().parents[2] / "adapters" / "js" / "reference.js"
# What each database needs of adapters/js/node_modules (make js installs and builds them).
CHUNK = 100  # pairs timed in one turn of each queue (see bridge_vs_native)
_LIBRARY = {db.SQLITE: Path("better-sqlite3") / "build" / "Release" / "better_sqlite3.node", db.POSTGRES: Path("pg")}


def js_reference(database: str = db.POSTGRES) -> str:
    """The JS reference queue's ``exec:`` name, or a one-line UsageError saying what is missing."""
    if shutil.which("node") is None:
        raise UsageError("bridge_vs_native needs node (scripts/system-packages install nodejs)")
    if not (JS_REFERENCE.parent / "node_modules" / _LIBRARY[database]).exists():
        raise UsageError(f"bridge_vs_native needs {JS_REFERENCE.parent}'s libraries: run make js (npm ci)")
    return f"exec:node {JS_REFERENCE}"


def bridge_vs_native(pairs: int, repetitions: int, database: str = db.POSTGRES) -> dict[str, Any]:
    """``database``: ``db.POSTGRES`` (the served server's fresh databases) or ``db.SQLITE`` (fresh files).

    Each repetition opens both queues on fresh databases, then times them in alternation, ``CHUNK`` pairs
    at a time (A B B A ...), rather than a whole repetition each: a commit on the served PostgreSQL waits
    for an fsync (fsync=on), which on a shared disk took from 0.4 to 9 ms within one minute, so only
    turns of a fraction of a second see the same disk. The rates are the chunks', the figure the median of
    the rounds' ratios (takeover.benchmarks.timing.Turns).
    """
    spec = js_reference(database)
    if database == db.POSTGRES:
        from takeover.benchmarks.postgres import FreshDatabases

        fresh: Any = FreshDatabases(pairs + 2 * CHUNK)
    else:
        fresh = queue_raw.FreshQueues(pairs + 2 * CHUNK)
    turns = Turns()
    with fresh:
        for _ in range(repetitions):
            bridged = fresh.track(open_queue(spec, fresh.path()))
            native = fresh.queue()
            # The first (untimed) turn of each makes the connections and prepares the statements.
            turns.run(partial(queue_raw.queue_pairs, bridged, CHUNK), partial(queue_raw.queue_pairs, native, CHUNK),
                      max(1, pairs // CHUNK))
    figures = turns.figures("bridge_vs_native", "bridge_pairs_per_s", "native_pairs_per_s")
    per_pair_us = 1e6 / figures["bridge_pairs_per_s"] - 1e6 / figures["native_pairs_per_s"]
    figures["per_call_overhead_us"] = round(per_pair_us / 2, 1)
    figures["db"] = database
    return figures

