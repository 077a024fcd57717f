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

from takeover.config import RunConfig
from takeover.store import SUMMARY_FILE, SWEEP_CELLS, SWEEP_CSV, SWEEP_GRID
from takeover.sweep.grid import Cell, Grid
from takeover.sweep.metrics import COLUMNS, cell_row


@dataclass
class SweepResult:
    out: Path
    rows: list[dict[str, Any]] = field(default_factory=list)
    interrupted: bool = False
    violations: list[dict[str, Any]] = field(default_factory=list)
    planned: int = 0


def run_sweep(grid: Grid, out: Path, *, stream: TextIO | None = None, live: bool | None = None,
              on_row: Callable[[dict[str, Any]], None] | None = None) -> SweepResult:
    """Run every (cell, seed) of the grid into ``out/cells/``; ``sweep.csv`` gets one row per run."""
    runs = grid.runs()
    configs = [(cell, seed, grid.config(cell, seed, cell_dir(out, cell, seed))) for cell, seed in runs]
    out.mkdir(parents=True, exist_ok=True)
    (out / SWEEP_GRID).write_text(json.dumps(grid.to_json(), indent=2, default=str) + "\n")
    return run_cells(configs, out, planned=len(configs), stream=stream, live=live, on_row=on_row)


def cell_dir(out: Path, cell: Cell, seed: int) -> Path:
    """Where one run of one cell goes: ``out/cells/<cell id>-s<seed>``."""
    return out / SWEEP_CELLS / f"{cell.cell_id}-s{seed}"


def run_cells(configs: Iterable[tuple[Cell, int, RunConfig]], out: Path, *, planned: int, csv_name: str = SWEEP_CSV,
              label: str = "sweep", stream: TextIO | None = None, live: bool | None = None,
              on_row: Callable[[dict[str, Any]], None] | None = None,
              describe: Callable[[dict[str, Any]], str] | None = None) -> SweepResult:
    """Run each (cell, seed, config) in turn, one row each into ``out/<csv_name>``; a violation is printed loudly.

    ``configs`` may be a generator that decides the next run from the rows so far: ``on_row`` is called
    with each row before the next run is asked for (``takeover tune``'s search does that); ``planned``
    is then an estimate, for the progress display only. ``describe`` words a run's progress line (called
    after ``on_row``, so it may say what the row changed); by default the sweep's own, in the run's units.
    """
    from takeover.run.coordinator import Coordinator
    from takeover.workloads.worker import worker_main

    stream = stream or sys.stderr
    out.mkdir(parents=True, exist_ok=True)
    result = SweepResult(out, planned=planned)
    with open(out / csv_name, "w", newline="") as fh, SweepProgress(stream, planned, live, label) as progress:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS)
        writer.writeheader()
        fh.flush()
        for index, (cell, seed, cfg) in enumerate(configs):
            run_dir = Path(cfg.out or "")
            run_dir.mkdir(parents=True, exist_ok=True)
            progress.start(index, cell, seed)
            started = time.monotonic()
            try:
                run = Coordinator(cfg, run_dir, worker=worker_main).run()
            except KeyboardInterrupt:
                result.interrupted = True
                break
            if run.interrupted:
                result.interrupted = True
                break
            row = cell_row(cell, cfg, run_dir, time.monotonic() - started)
            writer.writerow(row)
            fh.flush()
            result.rows.append(row)
            if row["valid"] is False:
                result.violations.append(row)
                progress.loud(f"INVARIANT VIOLATED in cell {row['cell']} seed {seed}: {row['violated']} "
                              f"(a queue bug, not a tuning result) - see {run_dir / SUMMARY_FILE}")
            if on_row:
                on_row(row)
            progress.done(index, row, describe(row) if describe else None)
    result.planned = max(result.planned, len(result.rows))
    return result


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

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def start(self, index: int, cell: Cell, seed: int) -> None:
        if self._progress is not None:
            self._progress.update(self._task, description=f"{cell.cell_id} seed {seed}")

    def done(self, index: int, row: dict[str, Any], text: str | None = None) -> None:
        text = text or (f"{row['cell']} seed {row['seed']}: dup/1000 {row['dup_per_1000']}, recovery p99 "
                        f"{row['recovery_p99']}s, {row['throughput_per_s']} tasks/s, {row['elapsed_s']}s")
        if self._progress is not None:
            self._progress.update(self._task, advance=1)
            self._progress.console.print(text, highlight=False)
        else:
            elapsed = time.monotonic() - self._t0
            total = max(self.total, index + 1)
            print(f"[{self.label} {index + 1}/{total} {elapsed:5.0f}s] {text}", file=self.stream, flush=True)

    def loud(self, text: str) -> None:
        if self._progress is not None:
            self._progress.console.print(f"[bold red]{text}[/]")
        else:
            print(f"!!! {text}", file=self.stream, flush=True)
