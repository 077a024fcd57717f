"""The words of the seam every multi-run command starts its runs through: a :class:`Job` in, a :class:`Done`
out, the :class:`Launcher` that takes one and gives the other, and :class:`ClusterLost`.

Why a module of its own: both launchers speak these words, the local one (:mod:`takeover._internal.fanout.launch`)
and the cluster's (:mod:`takeover._internal.fanout.cluster`), and the command's seam opens either; the words stand
below both, so neither imports the other back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol


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
