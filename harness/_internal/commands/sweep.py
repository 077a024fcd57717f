"""``takeover sweep``: a grid of real stress runs -> ``sweep.csv`` + ``sweep.md`` / ``sweep.html``.

Exit code: 0 when every cell's invariants held, 1 when any cell violated one (a queue bug, printed
loudly), 2 bad input, 130 interrupted (the finished cells are kept and reported).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from takeover._internal import store
from takeover._internal.fanout.launch import fanout_outcome
from takeover._internal.scratch import scratch_dir
from takeover.exit_codes import ExitCode

if TYPE_CHECKING:  # the sweep's modules are imported when the command runs, not when the CLI starts
    from takeover._internal.fanout.launch import Launcher
    from takeover._internal.sweep.grid import Cell, Grid

HELP = "run a grid of stress runs (lease x task time x faults x remedy/heartbeat) and recommend a lease"


def _floats(text: str) -> list[float]:
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one number")
    return values


def configure(parser: argparse.ArgumentParser) -> None:
    from takeover._internal.options import add_db_options, add_run_options
    from takeover._internal.sweep.grid import DEFAULT_GRID

    parser.add_argument("--grid", default=DEFAULT_GRID,
                        help=f"grid file: a name in workloads/ (e.g. {DEFAULT_GRID}, workloads/sweep-tiny) or a "
                             ".toml path")  # fmt: skip
    parser.add_argument("--seeds", type=int, help="runs per cell (seeds seed, seed+1, ...)")
    parser.add_argument("--seed", type=int, help="first seed")
    parser.add_argument("--out", help="output folder (default runs/sweep-<timestamp>); must be new or empty")
    parser.add_argument("--lease", type=_floats, metavar="S,S,...", help="lease lengths, replacing the grid's")
    parser.add_argument("--fault-scale", type=_floats, metavar="X,X,...",
                        help="multipliers of the grid's fault rates, replacing the grid's")
    parser.add_argument("--power-loss", type=_floats, metavar="X,X,...",
                        help="power-loss rates per second, one cell per value (an axis of the grid; needs FUSE); "
                             "--power-loss-rate gives one value for every cell instead")  # fmt: skip
    parser.add_argument("--mode", action="append", metavar="REMEDY[+hbF]",
                        help="a mode, repeatable: none, idempotency-key, fencing, or none+hb0.3 (heartbeat every "
                             "0.3 leases); replaces the grid's modes")  # fmt: skip
    parser.add_argument("--target", type=float, help="lease-caused duplicates per 1000 tasks to stay under")
    add_run_options(parser, "sweep")  # one value for every run of the grid
    add_db_options(parser)
    parser.add_argument("--dry-run", action="store_true", help="list the runs the grid expands to and stop")
    from takeover._internal.options import add_fanout_options

    add_fanout_options(parser)


def build_grid(args: argparse.Namespace) -> Grid:
    from takeover._internal import db
    from takeover._internal.options import db_given, given
    from takeover._internal.sweep.grid import load_grid, parse_mode
    from takeover.errors import UsageError

    grid = load_grid(args.grid)
    grid.db = db.redact(db_given(args))
    if args.seeds is not None:
        if args.seeds < 1:
            raise UsageError(f"--seeds must be a positive integer, got {args.seeds}")
        grid.seeds = args.seeds
    if args.seed is not None:
        grid.seed = args.seed
    if args.lease:
        if any(v <= 0 for v in args.lease):
            raise UsageError(f"--lease values must be positive, got {args.lease}")
        grid.leases = args.lease
    if args.fault_scale:
        if any(v < 0 for v in args.fault_scale):
            raise UsageError(f"--fault-scale values must be >= 0, got {args.fault_scale}")
        grid.fault_scales = args.fault_scale
    if args.power_loss:
        if any(v < 0 for v in args.power_loss):
            raise UsageError(f"--power-loss values must be >= 0, got {args.power_loss}")
        grid.power_loss_rates = args.power_loss
    if args.mode:
        grid.modes = [parse_mode("--mode", m) for m in args.mode]
    if args.target is not None:
        if args.target < 0:
            raise UsageError(f"--target must be >= 0, got {args.target}")
        grid.target = args.target
    grid.fixed.update({key: value for key, value in given(args, "sweep").items() if value is not None})
    return grid


def _heartbeat_note(grid: Grid, queue: str) -> str:
    from takeover.contract import has_extension, open_queue

    if not any(m.heartbeat > 0 for m in grid.modes):
        return ""
    from takeover._internal import db

    with scratch_dir("takeover-sweep-") as tmp, db.current().database(Path(tmp), "sweep") as d:
        q = open_queue(queue, d)
        try:
            has = has_extension(q, "extend")
        finally:
            q.close()
    return "" if has else (f"queue {queue} has no extend(): heartbeat cells ran WITHOUT heartbeats "
                           "(their numbers are fixed-lease numbers)")


def run(args: argparse.Namespace) -> ExitCode:
    from takeover._internal import db
    from takeover._internal.fanout.launch import check_cluster
    from takeover._internal.options import db_given

    check_cluster(args.cluster, db=db_given(args))
    grid = build_grid(args)
    out = store.fresh_out(args.out, "sweep")
    from takeover._internal.sweep.runner import shard_of

    runs = grid.runs()
    first = grid.config(runs[0][0], runs[0][1], out)  # validates the base profile and fixed values
    for cell, seed in runs:  # every cell's values, before anything runs
        grid.config(cell, seed, out)
    runs = shard_of(runs, args.shard)
    if args.dry_run:
        for cell, seed in runs:
            print(f"{cell.cell_id} seed {seed}")
        print(f"{len(runs)} run(s) in {len(grid.cells())} cell(s)")
        return ExitCode.VALID
    from takeover._internal.fanout.launch import open_launcher

    with db.serve(db_given(args), keep=args.keep_db):
        from takeover._internal.stress_run import check_queue

        check_queue(first.queue)
        launcher = open_launcher(args.cluster, db=db_given(args))
        try:
            return _run(grid, out, runs, first.queue, launcher, args.shard)
        finally:
            launcher.close()


def _run(grid: Grid, out: Path, runs: list[tuple[Cell, int]], queue: str, launcher: Launcher,
         shard: tuple[int, int] | None = None) -> ExitCode:
    from takeover._internal.fanout.launch import announce, write_record
    from takeover._internal.sweep.conclude import conclude
    from takeover._internal.sweep.runner import run_sweep

    note = _heartbeat_note(grid, queue)
    part = f" (shard {shard[0]}/{shard[1]})" if shard else ""
    print(f"takeover sweep: grid {grid.name}, {len(runs)} run(s) in {len(grid.cells())} cell(s){part} -> {out}",
          flush=True)
    announce(launcher)
    if note:
        print(f"note: {note}", file=sys.stderr)
    result = run_sweep(grid, out, launcher=launcher, shard=shard)
    if launcher.remote:
        write_record(out, result.done, launcher)
    meta = {"grid": grid.name, "planned": result.planned, "queue": queue, "target": grid.target,
            "interrupted": result.interrupted, "no_heartbeat": note}
    if shard:
        from takeover._internal.fanout.merge import write_shard

        write_shard(out, "sweep", shard, [f"{c.cell_id}-s{seed}" for c, seed in grid.runs()], meta)
    code = conclude(out, meta, result.rows, result.violations)
    if code != ExitCode.VALID:
        return code
    return fanout_outcome("sweep", result.cluster_lost, result.lost) or ExitCode.VALID


