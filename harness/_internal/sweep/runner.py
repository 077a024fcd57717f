"""Run a grid's cells one after another as real stress runs, writing ``sweep.csv`` as it goes.

Why sequential: the machine has two cores and each cell is itself several processes whose timing
is what is measured; running cells side by side would make them steal CPU from each other and turn
lease expiries into measurements of the scheduler. Rows are appended and flushed per run, so an
interrupted sweep keeps every finished cell and its report can still be written.
"""

from __future__ import annotations

import csv
import json
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from takeover._internal.config import RunConfig, command_argv
from takeover._internal.fanout.launch import ClusterLost, Done, Job, Launcher, LocalLauncher
from takeover._internal.store import SUMMARY_FILE, SWEEP_CELLS, SWEEP_CSV, SWEEP_GRID
from takeover._internal.sweep.grid import Cell, Grid
from takeover._internal.sweep.metrics import COLUMNS, cell_row


@dataclass
class SweepResult:
    out: Path
    rows: list[dict[str, Any]] = field(default_factory=list)
    interrupted: bool = False
    violations: list[dict[str, Any]] = field(default_factory=list)
    planned: int = 0
    # With --cluster: every run's Done (where it ran, reruns), the runs lost with no folder, and why the
    # command stopped early when the scheduler went away.
    done: list[Done] = field(default_factory=list)
    lost: list[Done] = field(default_factory=list)
    cluster_lost: str = ""


def run_sweep(grid: Grid, out: Path, *, stream: TextIO | None = None, live: bool | None = None,
              on_row: Callable[[dict[str, Any]], None] | None = None, launcher: Launcher | None = None,
              shard: tuple[int, int] | None = None) -> SweepResult:
    """Run every (cell, seed) of the grid (of its ``shard``) into ``out/cells/``; ``sweep.csv`` gets one row per
    run."""
    runs = shard_of(grid.runs(), shard)
    configs = [(cell, seed, grid.config(cell, seed, cell_dir(out, cell, seed))) for cell, seed in runs]
    out.mkdir(parents=True, exist_ok=True)
    (out / SWEEP_GRID).write_text(json.dumps(grid.to_json(), indent=2, default=str) + "\n")
    return run_cells(configs, out, planned=len(configs), stream=stream, live=live, on_row=on_row, launcher=launcher)


def cell_dir(out: Path, cell: Cell, seed: int) -> Path:
    """Where one run of one cell goes: ``out/cells/<cell id>-s<seed>``."""
    return out / SWEEP_CELLS / f"{cell.cell_id}-s{seed}"


def cell_job(index: int, cell: Cell, seed: int, cfg: RunConfig, run_dir: Path) -> Job:
    """One run of a cell for the launcher: made here as ever (the coordinator), or remotely from its reproduce
    line."""

    def local() -> Any:
        from takeover._internal.stress_run import run_once

        return run_once(cfg, run_dir)

    return Job(f"{cell.cell_id}-s{seed}", run_dir, command_argv(cfg), local, tuple(cfg.pythonpath), index,
               {"cell": cell, "seed": seed, "cfg": cfg})


def run_cells(configs: Iterable[tuple[Cell, int, RunConfig]], out: Path, *, planned: int, csv_name: str = SWEEP_CSV,
              label: str = "sweep", stream: TextIO | None = None, live: bool | None = None,
              on_row: Callable[[dict[str, Any]], None] | None = None,
              describe: Callable[[dict[str, Any]], str] | None = None, launcher: Launcher | None = None,
              depth: int | None = None) -> SweepResult:
    """Run each (cell, seed, config), one row each into ``out/<csv_name>``; a violation is printed loudly.

    ``configs`` may be a generator that decides the next run from the rows so far: ``on_row`` is called
    with each row before the next run is asked for (``takeover tune``'s search does that, with ``depth`` 1:
    one run out at a time); ``planned`` is then an estimate, for the progress display only. ``describe``
    words a run's progress line (called after ``on_row``, so it may say what the row changed); by default
    the sweep's own, in the run's units.

    The runs go through ``launcher`` (default: here, one at a time, as always); up to ``depth`` (default:
    its slots) are out at once. Rows are written in the runs' own order whatever order they finish in, so
    ``sweep.csv`` is the same on a cluster as here.
    """
    stream = stream or sys.stderr
    launcher = launcher or LocalLauncher()
    depth = min(depth or launcher.slots, launcher.slots)
    out.mkdir(parents=True, exist_ok=True)
    result = SweepResult(out, planned=planned)
    with open(out / csv_name, "w", newline="") as fh, SweepProgress(stream, planned, live, label) as progress:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS)
        writer.writeheader()
        fh.flush()
        finished: dict[int, dict[str, Any] | None] = {}  # rows (None: no row) not written yet, by run index
        written = 0

        def write_ready(everything: bool = False) -> None:
            nonlocal written
            for index in sorted(finished):
                if index != written and not everything:
                    break
                row = finished.pop(index)
                if row is not None:
                    writer.writerow(row)
                    result.rows.append(row)
                written = index + 1
            fh.flush()

        pending = iter(enumerate(configs))
        exhausted = False
        if launcher.remote:  # the live line shows what runs where as it changes, not only at each submit
            launcher.on_wait = lambda: progress.start(-1, None, 0, launcher.status())
        try:
            while True:
                while not exhausted and launcher.busy() < depth and launcher.free():
                    item = next(pending, None)
                    if item is None:
                        exhausted = True
                        break
                    index, (cell, seed, cfg) = item
                    run_dir = Path(cfg.out or "")
                    run_dir.mkdir(parents=True, exist_ok=True)
                    launcher.submit(cell_job(index, cell, seed, cfg, run_dir))
                    progress.start(index, cell, seed, launcher.status())
                if not launcher.busy():
                    break
                done = launcher.next_done()
                result.done.append(done)
                job = done.job
                cell, seed, cfg = job.info["cell"], job.info["seed"], job.info["cfg"]
                if done.interrupted:
                    result.interrupted = True
                    break
                if done.lost:
                    result.lost.append(done)
                    finished[job.index] = None
                    write_ready()
                    progress.loud(f"RUN LOST: {job.key}: {done.note}")
                    continue
                row = cell_row(cell, cfg, job.run_dir, done.wall_s)
                finished[job.index] = row
                write_ready()
                if row["valid"] is False:
                    result.violations.append(row)
                    progress.loud(f"INVARIANT VIOLATED in cell {row['cell']} seed {seed}: {row['violated']} "
                                  f"(a queue bug, not a tuning result) - see {job.run_dir / SUMMARY_FILE}")
                if on_row:
                    on_row(row)
                text = describe(row) if describe else None
                if done.note:
                    text = f"{text or progress.row_text(row)} [{done.note}]"
                progress.done(job.index, row, text, launcher.status())
        except KeyboardInterrupt:
            result.interrupted = True
        except ClusterLost as exc:
            result.cluster_lost = str(exc)
        finally:
            if launcher.busy():
                launcher.cancel()
            write_ready(everything=True)
    result.planned = max(result.planned, len(result.rows))
    return result


def shard_of(runs: list[Any], shard: tuple[int, int] | None) -> list[Any]:
    """Shard ``I/N`` of a command's runs: run i (from 0) is in shard i mod N + 1; all of them without one."""
    if shard is None:
        return list(runs)
    i, n = shard
    return [r for k, r in enumerate(runs) if k % n == i - 1]


class SweepProgress:
    """A rich progress bar on a terminal; one plain line per run otherwise (CI logs)."""

    def __init__(self, stream: TextIO, total: int, live: bool | None = None, label: str = "sweep") -> None:
        self.stream = stream
        self.total = total
        self.label = label
        self.live = stream.isatty() if live is None else live
        self._progress: Any = None
        self._task: Any = None
        self._t0 = time.monotonic()
        self.count = 0  # runs reported done (a cluster finishes them in any order)

    def __enter__(self) -> SweepProgress:
        if self.live:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self._progress = Progress(TextColumn(f"[bold]{self.label}[/]"), BarColumn(), MofNCompleteColumn(),
                                      TimeRemainingColumn(), TextColumn("{task.description}"),
                                      console=Console(file=self.stream), transient=False)
            self._progress.start()
            self._task = self._progress.add_task("", total=self.total)
        return self

    @staticmethod
    def row_text(row: dict[str, Any]) -> str:
        return (f"{row['cell']} seed {row['seed']}: dup/1000 {row['dup_per_1000']}, recovery p99 "
                f"{row['recovery_p99']}s, {row['throughput_per_s']} tasks/s, {row['elapsed_s']}s")

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def start(self, index: int, cell: Cell | None, seed: int, cluster: str = "") -> None:
        """The live line names the run under way; on a cluster, what runs where (``cluster``) instead."""
        if self._progress is not None and (cluster or cell is not None):
            self._progress.update(self._task, description=cluster or f"{cell.cell_id if cell else ''} seed {seed}")

    def done(self, index: int, row: dict[str, Any], text: str | None = None, cluster: str = "") -> None:
        text = text or self.row_text(row)
        if self._progress is not None:
            self._progress.update(self._task, advance=1, description=cluster or None)
            self._progress.console.print(text, highlight=False)
        else:
            elapsed = time.monotonic() - self._t0
            self.count += 1
            total = max(self.total, self.count)
            where = f" ({cluster})" if cluster else ""
            print(f"[{self.label} {self.count}/{total} {elapsed:5.0f}s] {text}{where}", file=self.stream,
                  flush=True)  # fmt: skip

    def loud(self, text: str) -> None:
        if self._progress is not None:
            self._progress.console.print(f"[bold red]{text}[/]")
        else:
            print(f"!!! {text}", file=self.stream, flush=True)
