"""``takeover tune``: a lease (and heartbeat) for the user's own task durations, in production units.

It searches with real stress runs (:mod:`takeover._internal.tune`) and writes ``tuning.json``, ``tuning.md`` and
``tuning.html`` into ``--out``. Exit code: 0 a resolved recommendation, 1 an invariant violated in any
run (a queue bug: no recommendation, the violation instead), 2 bad input, 3 no resolved
recommendation within the budget (the best one found is still written), 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from takeover._internal import db
from takeover._internal.options import BY_DEST, NET_OPTIONS, QUEUE_FORMS, add_db_options, db_given, shell_line
from takeover.exit_codes import ExitCode

if TYPE_CHECKING:
    from takeover._internal.fanout.launch import Launcher

HELP = "recommend a lease and heartbeat for your own task durations and failure rates (a search of stress runs)"

DEFAULT_TARGET = 20.0  # lease-caused duplicates per 1000 tasks: the sweep's default, resolvable in one run a point
DEFAULT_BUDGET = 10.0  # minutes
PAUSE_FILE = "pause-times.json"  # the stalls' percentiles, in the tuning's folder, for every run to read


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--task-times", required=True, metavar="FILE",
                        help="your observed task durations in seconds: a CSV column (FILE or FILE:COLUMN), a JSON "
                             "list, or JSON percentiles {\"p50\": .., \"p90\": .., \"p99\": .., \"max\": ..}")
    parser.add_argument("--target", type=float, default=DEFAULT_TARGET,
                        help=f"lease-caused duplicates per 1000 tasks to stay under (default {DEFAULT_TARGET:g})")
    parser.add_argument("--time-scale", type=float, metavar="K",
                        help="divide every duration, lease and rate period by K for the runs (default: derived from "
                             "the harness's per-call latency, measured)")
    parser.add_argument("--budget", type=float, default=DEFAULT_BUDGET, metavar="MINUTES",
                        help=f"wall-clock minutes the search may spend (default {DEFAULT_BUDGET:g})")
    parser.add_argument("--queue", help=f"the queue under test, {QUEUE_FORMS} (default: the reference queue)")
    add_db_options(parser)  # handed to every run
    parser.add_argument("--out", help="output folder (default runs/tune-<timestamp>); must be new or empty")
    parser.add_argument("--crash-rate-per-hour", type=float, default=0.5, metavar="R",
                        help="worker crashes per worker and hour in production (default 0.5)")
    parser.add_argument("--pause-rate-per-hour", type=float, default=0.0, metavar="R",
                        help="stalls (GC or VM pauses) per worker and hour in production (default 0: none)")
    for q in ("p50", "p99", "max"):
        parser.add_argument(f"--pause-{q}", type=float, metavar="S",
                            help=f"the stalls' {q} in seconds" + (" (optional)" if q == "max" else ""))
    parser.add_argument("--lost-reply-rate", type=float, default=0.0, metavar="P",
                        help="probability that the external service acts and its reply is lost (default 0)")
    parser.add_argument("--tasks-per-hour", type=float, metavar="N",
                        help="your task rate, for the duplicates per day")
    parser.add_argument("--seed", type=int, default=1, help="first seed (run i uses seed + i)")
    from takeover._internal.options import add_fanout_options, add_option

    for o in NET_OPTIONS:  # as takeover stress takes them, in production units like the rest
        add_option(parser, o, o.help + ("" if o.flag in ("--hosts", "--net-loss") else
                                        "; in production units, scaled into the runs by the time scale"))

    # On a cluster the runs are made there, one at a time (each run of the search is chosen from the runs
    # before it), and the answer is the local one. --shard I/N makes the ladders' points instead, for
    # takeover merge to walk the search over (takeover._internal.tune.shard).
    add_fanout_options(parser)


def _command(args: argparse.Namespace, spec: str, scale: float, queue: str, prefix: str) -> str:
    """The line that runs this tuning again: every value explicit, the derived time scale included."""
    parts = ["takeover", "tune", "--task-times", spec, "--target", f"{args.target:g}", "--time-scale", f"{scale:g}",
             "--budget", f"{args.budget:g}", "--queue", queue, "--crash-rate-per-hour", f"{args.crash_rate_per_hour:g}",
             "--lost-reply-rate", f"{args.lost_reply_rate:g}", "--seed", str(args.seed)]
    if args.pause_rate_per_hour:
        parts += ["--pause-rate-per-hour", f"{args.pause_rate_per_hour:g}"]
        for q in ("p50", "p99", "max"):
            if getattr(args, f"pause_{q}") is not None:
                parts += [f"--pause-{q}", f"{getattr(args, f'pause_{q}'):g}"]
    if args.tasks_per_hour is not None:
        parts += ["--tasks-per-hour", f"{args.tasks_per_hour:g}"]
    for dest, value in _network(args).items():
        parts += BY_DEST[dest].argv(value)
    if db_given(args) != db.DEFAULT:
        parts += ["--db", db.redact(db_given(args))]
    return prefix + shell_line(parts)


def _checked(args: argparse.Namespace) -> None:
    from takeover._internal.options import is_number
    from takeover.errors import UsageError

    for name, value, least in (("target", args.target, 0.0), ("budget", args.budget, 0.0),
                               ("crash-rate-per-hour", args.crash_rate_per_hour, 0.0),
                               ("pause-rate-per-hour", args.pause_rate_per_hour, 0.0),
                               ("lost-reply-rate", args.lost_reply_rate, 0.0)):
        if not is_number(value) or value < least:
            raise UsageError(f"--{name} must be a number >= 0, got {value:g}")
    if args.target == 0:
        raise UsageError("--target 0 cannot be shown by any number of tasks (the 95% upper bound is never 0)")
    if args.budget == 0:
        raise UsageError("--budget must be above 0 minutes")
    if args.lost_reply_rate > 1:
        raise UsageError(f"--lost-reply-rate is a probability and must be <= 1, got {args.lost_reply_rate:g}")
    for name, value in (("time-scale", args.time_scale), ("tasks-per-hour", args.tasks_per_hour)):
        if value is not None and (not is_number(value) or value <= 0):
            raise UsageError(f"--{name} must be a positive number, got {value:g}")
    given = {q: getattr(args, f"pause_{q}") for q in ("p50", "p99", "max") if getattr(args, f"pause_{q}") is not None}
    if args.pause_rate_per_hour and ("p50" not in given or "p99" not in given):
        raise UsageError("--pause-rate-per-hour needs the stalls' length: --pause-p50 S and --pause-p99 S")
    if given and not args.pause_rate_per_hour:
        raise UsageError("--pause-p50/--pause-p99/--pause-max need --pause-rate-per-hour R (stalls per worker-hour)")
    if getattr(args, "shard", None) and args.time_scale is None:
        raise UsageError("--shard needs --time-scale K: every shard must run the same ladders, and the derived "
                         "scale is measured on each machine")


def _network(args: argparse.Namespace) -> dict[str, Any]:
    """--hosts and the network faults given (the defaults left out), each checked as takeover stress checks it."""
    given = {o.dest: getattr(args, o.dest) for o in NET_OPTIONS if getattr(args, o.dest) not in (None, 0, 0.0)}
    for dest, value in given.items():
        check = BY_DEST[dest].check
        if check is not None:
            check(BY_DEST[dest].name, value)
    return given


def _pause_summary(args: argparse.Namespace) -> dict[str, float] | None:
    """The stalls' percentiles as a summary takeover._internal.task_times reads (checked like a durations file)."""
    if not args.pause_rate_per_hour:
        return None
    from takeover._internal.task_times import from_summary

    summary = {q: getattr(args, f"pause_{q}") for q in ("p50", "p99", "max") if getattr(args, f"pause_{q}") is not None}
    from_summary(summary, "--pause-p50/--pause-p99/--pause-max")
    return summary


def run(args: argparse.Namespace) -> ExitCode:
    from takeover._internal import store
    from takeover._internal.config import check_network
    from takeover._internal.fanout.launch import check_cluster
    from takeover._internal.stress_run import check_queue
    from takeover._internal.task_times import load_task_times, split_spec
    from takeover.contract import reference_queue

    database = db_given(args)
    check_cluster(args.cluster, db=database)
    _checked(args)
    check_network(database, _network(args))  # before any server starts: --hosts with sqlite is one line, exit 2
    pauses = _pause_summary(args)
    times = load_task_times(args.task_times)
    path, column = split_spec(args.task_times)
    spec = str(path.absolute()) + (f":{column}" if column else "")
    out = store.fresh_out(args.out, "tune")
    queue = args.queue or reference_queue(database)
    with db.serve(database, keep=args.keep_db):
        check_queue(queue)
        from takeover._internal.fanout.launch import open_launcher

        launcher = open_launcher(args.cluster, db=database)
        try:
            return _tune(args, queue, database, spec, times, out, pauses, launcher)
        finally:
            launcher.close()


def _tune(args: argparse.Namespace, queue: str, database: str, spec: str, times: Any, out: Path,
          pauses: dict[str, float] | None, launcher: Launcher) -> ExitCode:
    from takeover._internal import store
    from takeover._internal.config import location_prefix
    from takeover._internal.fanout.launch import announce, fanout_outcome, write_record
    from takeover._internal.tune.driver import run_tuning
    from takeover._internal.tune.plan import Failures, Plan, default_scale, measure_call_latency, measure_stall
    from takeover._internal.tune.result import tuning_json
    from takeover.reports.tuning import say, write_tuning_report

    latency, has_extend = measure_call_latency(queue)
    scale = args.time_scale if args.time_scale is not None else default_scale(times, latency)
    plan = Plan(spec=spec, times=times, target=args.target, budget_s=60 * args.budget, scale=scale,
                scale_derived=args.time_scale is None, latency_s=latency, queue=queue, has_extend=has_extend,
                stall_s=measure_stall(),
                seed=args.seed, failures=Failures(args.crash_rate_per_hour, args.lost_reply_rate,
                                                  args.pause_rate_per_hour,
                                                  str((out / PAUSE_FILE).absolute()) if pauses else ""),
                tasks_per_hour=args.tasks_per_hour, db=db.redact(database), net=_network(args))
    plan.check()
    if pauses:  # the runs read the stalls from the tuning's folder, as a run reads --pause-time-file
        out.mkdir(parents=True, exist_ok=True)
        store.write_json(out / PAUSE_FILE, pauses)
    grid = plan.grid()
    first = grid.config(plan.cell(grid, plan.fixed_ladder()[0]), plan.seed, out)  # every value checked up front
    command = _command(args, spec, scale, queue, location_prefix(first))
    print(f"takeover tune: {spec} (p50 {times.p50:g} s, p99 {times.p99:g} s, max {times.max:g} s), time scale "
          f"{scale:g}{' (derived)' if plan.scale_derived else ''}, per-call latency {1000 * latency:.2g} ms, "
          f"scheduler stalls p99 {1000 * plan.stall_s:.2g} ms ({plan.stall_s * scale:.2g} s in production units), "
          f"{plan.tasks_per_run} tasks per run, budget {args.budget:g} min -> {out}", flush=True)
    print("one line per run, in production seconds: its lease-caused duplicates (a live holder outlived its lease: "
          "what the target and the Evidence table count; all causes beside), and how its lease stands so far",
          flush=True)
    announce(launcher)
    started = time.monotonic()
    if args.shard:
        return _tune_shard(plan, out, args.shard, command, launcher, started)
    tuning, result = run_tuning(plan, out, launcher=launcher)
    if launcher.remote:
        write_record(out, result.done, launcher)
    data = tuning_json(tuning, command=command, interrupted=result.interrupted,
                       elapsed_s=time.monotonic() - started)
    store.write_json(out / store.TUNE_JSON, data)
    written = write_tuning_report(out, data)
    print(f"wrote {', '.join([store.TUNE_JSON, *written, store.TUNE_CSV])} in {out}")
    say(data)
    if result.interrupted:
        print("takeover tune: interrupted; the runs so far are kept and reported", file=sys.stderr)
        return ExitCode.INTERRUPTED
    if data["violations"]:
        return ExitCode.VIOLATED
    lost = fanout_outcome("tune", result.cluster_lost, result.lost)
    return lost or (ExitCode.VALID if data["resolved"] else ExitCode.INCONCLUSIVE)


def _tune_shard(plan: Any, out: Path, shard: tuple[int, int], command: str, launcher: Launcher,
                started: float) -> ExitCode:
    """Shard I/N: its points of the ladders, each until decided; no answer here (takeover merge gives it)."""
    from takeover._internal.fanout.launch import fanout_outcome, write_record
    from takeover._internal.tune.shard import run_shard, say_shard, write_tune_shard

    tuning, result = run_shard(plan, out, shard, launcher=launcher)
    if result.interrupted:
        tuning.stopped = "interrupted"  # the merge says so, as an interrupted tuning does
    if launcher.remote:
        write_record(out, result.done, launcher)
    write_tune_shard(out, shard, tuning, command, elapsed_s=time.monotonic() - started)
    say_shard(tuning, result, shard)
    if result.interrupted:
        return ExitCode.INTERRUPTED
    if tuning.violations():
        return ExitCode.VIOLATED
    lost = fanout_outcome("tune", result.cluster_lost, result.lost)
    return lost or (ExitCode.VALID if tuning.stopped == "done" else ExitCode.INCONCLUSIVE)


