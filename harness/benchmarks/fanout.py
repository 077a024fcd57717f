"""``fanout_vs_local``: the same sleep-bound runs on a dask ``local:2`` cluster vs two local jobs, one bench run.

Why sleep-bound runs: on two cores the question is what the cluster's machinery costs (a dask task per run,
the run's folder packed, sent and unpacked), not how two CPU-bound runs share two cores. Each run is a
``takeover stress`` whose tasks sleep (fixed task times, no faults), so its wall time is mostly waiting.

The local side is the detection bench's way of running jobs side by side: two threads, each making a run as
a child process (takeover._internal.child_run). The cluster side sends the very same command lines to
``local:2`` through takeover._internal.fanout. ``fanout_vs_local`` is local wall time over cluster wall time (>= 0.9:
the cluster costs at most a tenth); ``overhead_per_run_s`` is the extra wall time per run the cluster adds,
with the two slots busy.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

TARGET = 0.9
# A sleep-bound run: 2 workers, 16 tasks of 0.5 s each, no faults; its faulted phase is its tasks.
QUEUE, PROFILE = "takeover.queues.sqlite_lease:SQLiteLeaseQueue", "smoke"
EXTRA = ("--no-faults", "--workers", "2", "--tasks", "16", "--duration", "2", "--task-time-dist", "fixed",
         "--task-time-mean", "0.5", "--task-time-max", "0.5", "--probe-rate", "0")


def argv(seed: int) -> list[str]:
    """The run's command line, as takeover._internal.child_run makes it locally."""
    return ["stress", "--profile", PROFILE, "--queue", QUEUE, "--seed", str(seed), *EXTRA]


def _warm() -> None:
    import takeover._internal.fanout.remote  # noqa: F401
    import takeover._internal.stress_run  # noqa: F401 - what a run imports first


def measure(runs: int = 4) -> dict[str, Any]:
    """Wall seconds of ``runs`` runs two at a time locally and on ``local:2``, and their ratio.

    The two sides take turns, two runs each (a pair here, then a pair on the cluster, ...), so a load that
    comes and goes on the machine falls on both sides alike rather than on whichever ran second."""
    from takeover._internal.child_run import stress_command
    from takeover._internal.fanout.launch import Job, open_launcher

    root = Path(tempfile.mkdtemp(prefix="takeover-bench-fanout-"))
    local_s = cluster_s = 0.0
    codes: list[int] = []
    remote_codes: list[int | None] = []
    walls: list[float] = []
    launcher = open_launcher("local:2")
    try:
        launcher.client.run(_warm)  # type: ignore[attr-defined]  # each worker has takeover loaded, as a
        for first in range(1, runs + 1, 2):  # long-running cluster's workers have after their first run
            pair = [s for s in (first, first + 1) if s <= runs]
            started = time.monotonic()
            with ThreadPoolExecutor(max_workers=2) as pool:
                codes += pool.map(lambda s: stress_command(QUEUE, s, PROFILE, root / f"local-{s}", EXTRA)[0], pair)
            local_s += time.monotonic() - started
            started = time.monotonic()
            for s in pair:
                launcher.submit(Job(f"s{s}", root / f"cluster-{s}", argv(s), lambda: None, (), s))
            while launcher.busy():
                done = launcher.next_done()
                remote_codes.append(done.exit_code)
                walls.append(done.wall_s)
            cluster_s += time.monotonic() - started
    finally:
        launcher.close()
        shutil.rmtree(root, ignore_errors=True)
    return {"fanout_vs_local": round(local_s / cluster_s, 3), "target": f">= {TARGET:g}",
            "pass": local_s / cluster_s >= TARGET, "runs": runs, "local_s": round(local_s, 2),
            "cluster_s": round(cluster_s, 2), "overhead_per_run_s": round(2 * (cluster_s - local_s) / runs, 2),
            "run_wall_on_worker_s": round(sum(walls) / len(walls), 2), "local_exit_codes": codes,
            "cluster_exit_codes": remote_codes, "run": " ".join(["takeover", *argv(1)])}  # fmt: skip
