"""The seam every multi-run command starts its runs through: a :class:`Job` in, a :class:`Done` out.

A command submits jobs while :meth:`Launcher.free` says there is room, and takes finished ones from
:meth:`Launcher.next_done`. The words (:class:`Job`, :class:`Done`, :class:`Launcher`) are
:mod:`takeover._internal.fanout.jobs`'s, handed on here. The local launcher has one slot and makes the run inside
``next_done``, with the call the command always made (``Job.local``): the command's behaviour and results
without ``--cluster`` are those it had before the seam. The cluster launcher (:mod:`takeover._internal.fanout.cluster`)
has a slot per dask worker thread and makes the run from ``Job.argv``, the run's reproduce line.
"""

from __future__ import annotations

import collections
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from takeover._internal.fanout.cluster import ClusterLauncher

# The seam's words, handed on: a command imports the whole seam from here.
from takeover._internal.fanout.jobs import ClusterLost as ClusterLost
from takeover._internal.fanout.jobs import Done as Done
from takeover._internal.fanout.jobs import Job as Job
from takeover._internal.fanout.jobs import Launcher as Launcher
from takeover.errors import UsageError
from takeover.exit_codes import ExitCode


class LocalLauncher:
    """Today's way: one run at a time, made here by ``Job.local`` when the command asks for the next done."""

    slots = 1
    dashboard: str | None = None
    remote = False
    on_wait: Callable[[], None] | None = None

    def __init__(self) -> None:
        self._queued: collections.deque[Job] = collections.deque()

    def free(self) -> bool:
        return not self._queued

    def submit(self, job: Job) -> None:
        self._queued.append(job)

    def busy(self) -> int:
        return len(self._queued)

    def next_done(self) -> Done:
        job = self._queued.popleft()
        started = time.monotonic()
        value = job.local()
        return Done(job, value=value, wall_s=time.monotonic() - started,
                    interrupted=bool(getattr(value, "interrupted", False)))  # fmt: skip

    def status(self) -> str:
        return ""

    def cancel(self) -> None:
        self._queued.clear()

    def close(self) -> None:
        pass


def open_launcher(cluster: str | None, *, db: str = "sqlite") -> Launcher:
    """The launcher ``--cluster`` asks for (none: the local one). Bad input is a :class:`UsageError` (exit 2):
    a malformed address, dask not installed, a scheduler that does not answer, a database a remote run
    cannot reach."""
    if not cluster:
        return LocalLauncher()
    check_cluster(cluster, db=db)
    return ClusterLauncher(cluster)


def check_cluster(cluster: str | None, *, db: str = "sqlite") -> None:
    """``--cluster``'s value, the extra and the database, checked before a command starts anything."""
    if not cluster:
        return
    check_address(cluster)
    if db in ("postgres", "redis"):
        scheme = "postgresql" if db == "postgres" else "redis"
        raise UsageError(f"--cluster with --db {db}: that server is private to this machine; give the "
                         f"runs a {scheme}:// URL every dask worker reaches")  # fmt: skip
    check_cluster_extra()


def check_cluster_extra() -> None:
    """dask.distributed is there (the extra takeover[cluster]), else one line saying how to get it."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise UsageError("--cluster needs dask.distributed, the extra takeover[cluster]: "
                         "pip install 'takeover[cluster]'") from None  # fmt: skip


def check_address(cluster: str) -> None:
    """``tcp://HOST:PORT`` or ``local:N`` (N >= 1), else one line naming the problem."""
    if cluster.startswith("local:"):
        n = cluster.removeprefix("local:")
        if not n.isdigit() or int(n) < 1:
            raise UsageError(f"--cluster local:N needs a number of workers N >= 1, got {cluster!r}")
        return
    host, _, port = cluster.removeprefix("tcp://").rpartition(":")
    if not cluster.startswith("tcp://") or not host or not port.isdigit():
        raise UsageError(f"--cluster takes tcp://HOST:PORT (a dask scheduler) or local:N, got {cluster!r}")


def write_record(folder: Path, done: list[Done], launcher: Launcher, extra: dict[str, Any] | None = None) -> Path:
    """``fanout.json`` in the command's folder: where each run ran, how often it was started, and why a run
    was rerun or lost. Written only for cluster runs (a local command's folder is as it always was)."""
    from takeover._internal import store

    payload = {"cluster": getattr(launcher, "address", None), "dashboard": launcher.dashboard,
               "slots": launcher.slots, "runs": [d.record() for d in sorted(done, key=lambda d: d.job.index)],
               **(extra or {})}  # fmt: skip
    path = folder / FANOUT_FILE
    store.write_json(path, payload)
    return path


FANOUT_FILE = "fanout.json"


def announce(launcher: Launcher, out: TextIO | None = None) -> None:
    """One line naming the cluster, its slots and its dashboard (nothing for the local launcher)."""
    if launcher.remote:
        board = f"; dashboard {launcher.dashboard}" if launcher.dashboard else ""
        print(f"cluster {getattr(launcher, 'address', '?')}: {launcher.slots} run(s) at once{board}",
              file=out or sys.stdout, flush=True)  # fmt: skip


def fanout_outcome(command: str, cluster_lost: str, lost: list[Done], out: TextIO | None = None) -> ExitCode | None:
    """Exit 3 (and why, on stderr) when the scheduler went away or a run was lost; None when neither."""
    err = out or sys.stderr
    for d in lost:
        print(f"takeover {command}: run {d.job.key} LOST, not counted: {d.note}", file=err)
    if cluster_lost:
        print(f"takeover {command}: {cluster_lost}; ended with the {command}'s runs gathered so far "
              "(the rest never ran)", file=err)  # fmt: skip
    return ExitCode.INCONCLUSIVE if cluster_lost or lost else None
