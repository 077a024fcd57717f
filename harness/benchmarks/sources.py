"""What each figure of ``takeover bench`` measures: one function per source (bench.json's ``measurements``
key), each importing its benchmark module only when called, so ``takeover bench --help`` loads none of them.
``MEASURE`` is SQLite's set; ``MEASURE_POSTGRES`` the figures that measure the queue on PostgreSQL (the same
targets, takeover._internal.commands.bench)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from takeover._internal import db
from takeover.exit_codes import ExitCode


def _queue_vs_raw(pairs: int, repetitions: int) -> dict[str, Any]:
    from takeover.benchmarks import queue_raw

    return queue_raw.measure(pairs, repetitions)


def _workers4(seconds: float, repetitions: int, extra: int = 0) -> dict[str, Any]:
    from takeover.benchmarks import workers4

    return workers4.measure(seconds, repetitions, extra=extra)


def _history_overhead(pairs: int, repetitions: int) -> dict[str, Any]:
    from takeover.benchmarks import history_overhead

    return history_overhead.measure(pairs, repetitions)


def _full_vs_normal(pairs: int, repetitions: int) -> dict[str, Any]:
    from takeover.benchmarks import durability

    return durability.measure(pairs, repetitions)


# ``python -m takeover.benchmarks.check_1m ARGS`` that dies with the bench (argv[1]: the bench's pid), taking its own
# child along: the kernel sends it SIGTERM when the bench dies (takeover._internal.lifeline), which it turns into
# SystemExit, and subprocess.run kills the measuring child it waits for on the way out. Without it, a bench
# SIGKILLed with its janitor left check_1m and its child running to their end (found by
# tests/system/test_bench_endings.py).
_CHECK_1M = ("import runpy, signal, sys; from takeover._internal.lifeline import die_with_parent; "
             "signal.signal(signal.SIGTERM, lambda *_: sys.exit(70)); die_with_parent(int(sys.argv.pop(1)), "
             "signal.SIGTERM); runpy.run_module('takeover.benchmarks.check_1m', run_name='__main__', alter_sys=True)")


def _check_1m(events: int, repeat: int) -> dict[str, Any]:
    """In child processes (its own module does that): peak RSS must be the checker's alone."""
    import os
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="takeover-bench-check-")
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _CHECK_1M, str(os.getpid()), "--events", str(events), "--repeat", str(repeat),
             "--dir", folder],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if proc.returncode != ExitCode.VALID:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"check_1m failed (exit {proc.returncode}): {tail}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


MEASURE: dict[str, Callable[..., dict[str, Any]]] = {
    "queue_vs_raw": _queue_vs_raw,
    "workers4_vs_raw": _workers4,
    "history_overhead": _history_overhead,
    "check_1m": _check_1m,
    "full_vs_normal": _full_vs_normal,
}


def _postgres(name: str) -> Callable[..., dict[str, Any]]:
    def measure(**size: Any) -> dict[str, Any]:
        from takeover.benchmarks import postgres

        result: dict[str, Any] = getattr(postgres, name)(**size)
        return result

    return measure


def bridge(pairs: int, repetitions: int, database: str = db.POSTGRES) -> dict[str, Any]:
    from takeover.benchmarks.bridge import bridge_vs_native

    return bridge_vs_native(pairs, repetitions, database)


# --db postgres: the figures that measure the queue, on the PostgreSQL reference queue (the same targets).
MEASURE_POSTGRES: dict[str, Callable[..., dict[str, Any]]] = {
    "queue_vs_raw": _postgres("queue_vs_raw"),
    "workers4_vs_raw": _postgres("workers4_vs_raw"),
    "bridge_vs_native": bridge,
}


def _redis_queue_vs_raw(pairs: int, repetitions: int) -> dict[str, Any]:
    from takeover.benchmarks import redis

    return redis.queue_vs_raw(pairs, repetitions)


# --db redis: the queue figure on the Redis reference queue (takeover.benchmarks.redis; same target).
MEASURE_REDIS: dict[str, Callable[..., dict[str, Any]]] = {"queue_vs_raw": _redis_queue_vs_raw}
