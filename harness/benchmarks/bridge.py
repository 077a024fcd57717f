"""``bridge_vs_native``: the JavaScript reference queue through the JSON-lines bridge vs the Python one.

Both are the spec's reference queue on PostgreSQL, one statement per call, the same statements
(adapters/js/reference.js and takeover.queues.postgres_lease), each on a fresh database of the served
server with its tasks registered; the timed loop is claim+finish pairs through the contract's methods
(queue_raw.queue_pairs), interleaved with the native queue's. The ratio is what going through another
process costs: a JSON line each way, a pipe, node's event loop and its driver. The per-call overhead is
that cost per call in microseconds: the difference of the two per-pair times, halved.
"""

from __future__ import annotations

import shutil
from functools import partial
from pathlib import Path
from typing import Any

from takeover.benchmarks import queue_raw
from takeover.benchmarks.postgres import FreshDatabases
from takeover.benchmarks.timing import compare, ratio_figures
from takeover.contract import open_queue
from takeover.errors import UsageError

# The repository's adapters (an editable install: harness/ is takeover, adapters/ beside it).
JS_REFERENCE = Path(__file__).resolve().parents[2] / "adapters" / "js" / "reference.js"


def js_reference() -> str:
    """The JS reference queue's ``exec:`` name, or a one-line UsageError saying what is missing."""
    if shutil.which("node") is None:
        raise UsageError("bridge_vs_native needs node (scripts/system-packages install nodejs)")
    if not (JS_REFERENCE.parent / "node_modules" / "pg").is_dir():
        raise UsageError(f"bridge_vs_native needs {JS_REFERENCE.parent}'s libraries: run make js (npm ci)")
    return f"exec:node {JS_REFERENCE}"


def bridge_vs_native(pairs: int, repetitions: int) -> dict[str, Any]:
    spec = js_reference()
    with FreshDatabases(pairs + 10) as fresh:

        def bridged() -> Any:
            queue = open_queue(spec, fresh.path())
            fresh._stack.callback(queue.close)
            queue.register("t0", 0.0)  # untimed: the adapter connects after its hello, on the first request
            return partial(queue_raw.queue_pairs, queue, pairs)

        cand, base = compare(bridged, lambda: partial(queue_raw.queue_pairs, fresh.queue(), pairs),
                             repetitions=repetitions)  # fmt: skip
    figures: dict[str, Any] = ratio_figures("bridge_vs_native", cand, base, "bridge_pairs_per_s",
                                            "native_pairs_per_s")  # fmt: skip
    per_pair_us = 1e6 / cand.median - 1e6 / base.median
    figures["per_call_overhead_us"] = round(per_pair_us / 2, 1)
    return figures
