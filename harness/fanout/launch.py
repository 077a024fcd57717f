"""The seam every multi-run command starts its runs through: a :class:`Job` in, a :class:`Done` out.

A command submits jobs while :meth:`Launcher.free` says there is room, and takes finished ones from
:meth:`Launcher.next_done`. The local launcher has one slot and makes the run inside ``next_done``, with the
call the command always made (``Job.local``): the command's behaviour and results without ``--cluster`` are
those it had before the seam. The cluster launcher (:mod:`takeover.fanout.cluster`) has a slot per dask
worker thread and makes the run from ``Job.argv``, the run's reproduce line.
"""

from __future__ import annotations

import collections
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TextIO

from takeover.errors import UsageError
from takeover.exit_codes import ExitCode


@dataclass
class Job:
    """One run to make: where its folder goes, the ``takeover`` arguments that make it (``stress ...``,
    without ``--out``), the queue's import paths, and how the command makes it here (``local``)."""

    key: str  # unique within the command: names the run in progress lines and in fanout.json
    run_dir: Path
    argv: list[str]
    local: Callable[[], Any]
    pythonpath: tuple[str, ...] = ()
    index: int = 0  # the run's place in the command's own order (results are reported in it)
    info: dict[str, Any] = field(default_factory=dict)  # the command's own notes on the run, handed back


@dataclass
class Done:
    """A finished job. Locally ``value`` is what ``Job.local`` returned; on a cluster ``exit_code`` is the
    remote ``takeover stress``'s and the run folder is in ``job.run_dir``. ``lost``: no run folder (the run
    was lost with a worker twice, or failed to start): ``note`` says why. ``interrupted``: the run was
    stopped before it ended (Ctrl-C)."""

    job: Job
    value: Any = None
    exit_code: int | None = None
    wall_s: float = 0.0
    worker: str = "local"
    attempts: int = 1
    note: str = ""
    lost: bool = False
    interrupted: bool = False

    def record(self) -> dict[str, Any]:
        """The run's line in ``fanout.json``."""
        return {"key": self.job.key, "run_dir": str(self.job.run_dir), "worker": self.worker,
                "attempts": self.attempts, "exit_code": self.exit_code, "wall_s": round(self.wall_s, 3),
                "lost": self.lost, "note": self.note}  # fmt: skip


class ClusterLost(Exception):
    """The dask scheduler went away: the runs still out are lost with it (the command ends, exit 3)."""


class Launcher(Protocol):
    slots: int
    dashboard: str | None
    remote: bool
    # Called every half second while next_done() waits for a remote run (none locally: the run is made in
    # the call): the command's live line shows the cluster as it is, not as it was at the last submit.
    on_wait: Callable[[], None] | None

    def free(self) -> bool: ...

    def submit(self, job: Job) -> None: ...

    def busy(self) -> int: ...

    def next_done(self) -> Done: ...

    def status(self) -> str: ...

    def cancel(self) -> None: ...

    def close(self) -> None: ...


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
    from takeover.fanout.cluster import ClusterLauncher

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
    from takeover import store

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
