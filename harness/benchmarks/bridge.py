"""``bridge_vs_native``: the JavaScript reference queue through the JSON-lines bridge vs the Python one.

Both are the spec's reference queue, one transaction per call and the same statements
(adapters/js/postgres.js and takeover.queues.postgres_lease on PostgreSQL, adapters/js/sqlite.js and
takeover.queues.sqlite_lease on SQLite), each on a fresh database with its tasks registered; the timed
loop is claim+finish pairs through the contract's methods (queue_raw.queue_pairs), interleaved with the
native queue's. The ratio is what going through another process costs: a JSON line each way, a pipe,
node and its driver. The per-call overhead is that cost per call in microseconds: the difference of the
two per-pair times, halved.

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

from takeover import db
from takeover.benchmarks import queue_raw
from takeover.benchmarks.timing import compare, ratio_figures
from takeover.contract import open_queue
from takeover.errors import UsageError

# The repository's adapters (an editable install: harness/ is takeover, adapters/ beside it).
JS_REFERENCE = Path(__file__).resolve().parents[2] / "adapters" / "js" / "reference.js"
# What each database needs of adapters/js/node_modules (make js installs and builds them).
_LIBRARY = {db.SQLITE: Path("better-sqlite3") / "build" / "Release" / "better_sqlite3.node", db.POSTGRES: Path("pg")}


def js_reference(database: str = db.POSTGRES) -> str:
    """The JS reference queue's ``exec:`` name, or a one-line UsageError saying what is missing."""
    if shutil.which("node") is None:
        raise UsageError("bridge_vs_native needs node (scripts/system-packages install nodejs)")
    if not (JS_REFERENCE.parent / "node_modules" / _LIBRARY[database]).exists():
        raise UsageError(f"bridge_vs_native needs {JS_REFERENCE.parent}'s libraries: run make js (npm ci)")
    return f"exec:node {JS_REFERENCE}"


def bridge_vs_native(pairs: int, repetitions: int, database: str = db.POSTGRES) -> dict[str, Any]:
    """``database``: ``db.POSTGRES`` (the served server's fresh databases) or ``db.SQLITE`` (fresh files)."""
    spec = js_reference(database)
    if database == db.POSTGRES:
        from takeover.benchmarks.postgres import FreshDatabases

        fresh: Any = FreshDatabases(pairs + 10)
    else:
        fresh = queue_raw.FreshQueues(pairs + 10)
    with fresh:

        def bridged() -> Any:
            queue = fresh.track(open_queue(spec, fresh.path()))
            queue.register("t0", 0.0)  # untimed: the adapter opens the database after its hello
            return partial(queue_raw.queue_pairs, queue, pairs)

        cand, base = compare(bridged, lambda: partial(queue_raw.queue_pairs, fresh.queue(), pairs),
                             repetitions=repetitions)  # fmt: skip
    figures: dict[str, Any] = ratio_figures("bridge_vs_native", cand, base, "bridge_pairs_per_s",
                                            "native_pairs_per_s")  # fmt: skip
    per_pair_us = 1e6 / cand.median - 1e6 / base.median
    figures["per_call_overhead_us"] = round(per_pair_us / 2, 1)
    figures["db"] = database
    return figures
