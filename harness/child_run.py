"""A stress run in a child process, reaped whatever happens to its caller.

Why a child at all: the selftest and the detection bench run planted queues that hang or crash on
purpose; in a child of its own such a queue cannot take the caller down with it. Interrupted, the
child and everything it started (workers, the external service) are killed before the interrupt
goes on. Why here, below the commands: ``takeover selftest`` and takeover.benchmarks both use it.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

from takeover import store
from takeover.errors import UsageError
from takeover.exit_codes import ExitCode

if TYPE_CHECKING:
    from takeover.summary_types import Summary


def stress_in_child(queue: str, seed: int, profile: str, out: Path, extra: tuple[str, ...] = ()
               ) -> tuple[int, float, Summary]:
    """One ``takeover stress`` run of ``queue`` as a subprocess: its exit code, wall time and summary.

    A subprocess rather than the coordinator in this process, so a planted queue that hangs or
    crashes cannot take the selftest (or the detection bench, which shares this) down with it;
    interrupted, the run and everything it started are reaped before the interrupt goes on.
    A run that wrote no summary raises UsageError with the last line it printed on stderr.
    """
    cmd = [sys.executable, "-m", "takeover", "stress", "--profile", profile, "--queue", queue,
           "--seed", str(seed), "--out", str(out), *extra]
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _, err = proc.communicate(timeout=600)
    except BaseException:
        reap_tree(proc.pid)
        raise
    took = time.monotonic() - started
    summary = store.read_summary(out) if proc.returncode != ExitCode.USAGE else None
    if summary is None:
        line = (err or "").strip().splitlines()[-1:] or ["no summary written"]
        raise UsageError(f"selftest: the stress run for {queue} failed (exit {proc.returncode}): {line[0]}")
    return proc.returncode, took, summary


def reap_tree(pid: int) -> None:
    """Kill a child run and everything it started (workers, service), then wait for them."""
    try:
        root = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return
    procs = root.children(recursive=True) + [root]
    for p in procs:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=10)
