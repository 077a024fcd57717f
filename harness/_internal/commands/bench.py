"""``takeover bench``: is takeover fast enough to stress a queue near SQLite's own limits?

Every figure is a ratio of two workloads measured in the same run on the same machine, so it
travels between machines where absolute rates do not; the absolute figures are printed beside it
so a surprising ratio can be traced to its numerator or its denominator. Each ratio has a target;
each is the median of alternating turns of its two workloads (takeover.benchmarks.timing.Turns),
shown with its spread and the load meanwhile. The command prints PASS/MISS per target when the whole
interquartile range of the rounds is on one side of it, "noisy" otherwise (with how to get a quieter
figure), writes ``bench.json``, and exits 1 when a target is missed (0 with ``--quick``, whose sizes
are far too small to judge anything: it proves the benchmarks run; and 0 for a noisy figure, which
judges nothing).

``--detection`` adds detection power (:mod:`takeover.benchmarks.detection`): each planted bug
under real stress runs with the aimed faults and without them (random faults only), its caught
fraction and median time to first violation in each, the ratios between them, bugs found per
minute, and the reference queue over the same seeds (a false alarm there is a release blocker),
under bench.json's ``detection`` key. By default 12 bugs and the reference x 10 seeds x 2 modes of
10 s runs plus their drains, two at a time: about 50 minutes on 2 cores, so it runs only when
asked. Its targets (issue 12) are printed with PASS/MISS but do not set the exit code: timing
figures on a shared machine are too noisy to fail a build on.

Endings: Ctrl-C (or SIGTERM, SIGHUP) ends the bench within a second or two with "takeover: interrupted" and
exit 130, every process it started reaped and its temporary folders removed, as every command ends
(takeover.cli); nothing is written. Every temporary folder of the measurements is made under one scratch
folder (``takeover-bench-*``, takeover._internal.scratch.temp_root): the ``with`` removes it on every ending
the bench sees, and the janitor that folder's creation started removes it the moment a SIGKILL ends the
bench. Why the janitor first and not a next run sweeping stale folders: a sweep leaves the folder until a
next bench that may never come; the janitor is the house's way for scratch folders (stress, explore, sweep,
mutate use it) and acts at once. The sweep is only the net below it: where the janitor died too (a cgroup
killed whole, as a cancelled CI job is), the next bench removes the folders whose owner lock (flock, held by
the living bench) can be taken, never a live bench's. The processes die with the bench by their own means: a
stress run's and the queue processes' children by takeover._internal.lifeline, detection's runs by
takeover._internal.child_run, servers by their watchdogs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from takeover._internal import db
from takeover._internal.options import add_db_options, db_given
from takeover._internal.run_option import WORKERS_PER_CORE, worker_count
from takeover._internal.scratch import temp_root
from takeover.benchmarks.bench_file import keep_earlier
from takeover.benchmarks.bench_run import BenchPlan, detection_runs, measure_bench, print_bench
from takeover.benchmarks.others_cpu import QUIET_SHARE
from takeover.benchmarks.sources import MEASURE, MEASURE_POSTGRES, MEASURE_REDIS, bridge
from takeover.benchmarks.targets import SOURCES, quieter, row_verdict
from takeover.benchmarks.timing import MISS
from takeover.errors import UsageError
from takeover.exit_codes import ExitCode

# Every temporary folder of a bench is made under one folder of this prefix (takeover._internal.scratch.temp_root).
SCRATCH_PREFIX = "takeover-bench-"

HELP = ("measure takeover's own overhead as ratios against bare SQLite (or PostgreSQL: --db); print a table, "
        "write bench.json")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true",
                        help="tiny sizes (a few seconds): proves the benchmarks run; figures mean nothing")  # fmt: skip
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="N times the rounds of every figure (N times as long): a tighter spread where a "
                             "figure came out noisy")  # fmt: skip
    parser.add_argument("--suite-log", default=None, metavar="FILE",
                        help="measure nothing: record the suite's own time (session wall time, the 15 slowest tests) "
                             "from FILE, the output of make test, into --out's suite key")  # fmt: skip
    parser.add_argument("--with-suite-log", default=None, metavar="FILE",
                        help="measure as asked and also record the suite's own time from FILE, the output of make "
                             "test, into --out's suite key (make bench passes build/test-log.txt, which make test "
                             "leaves); a log cut off before its summary is skipped with a line saying so")  # fmt: skip
    parser.add_argument("--out", default=None, metavar="FILE|DIR",
                        help="where to write the results (default bench.json); with --shard the shard's folder "
                             "(new or empty), which takeover merge joins with the others")  # fmt: skip
    parser.add_argument("--only", action="append", choices=(*SOURCES, "detection", "mutation", "fanout"),
                        metavar="NAME",
                        help=f"run only this measurement (repeatable): {', '.join(SOURCES)}, detection, mutation "
                             "(the mutation score alone), fanout (fanout_vs_local: sleep-bound runs on a dask local:2 "
                             "cluster vs two local jobs; needs takeover[cluster])")  # fmt: skip
    parser.add_argument("--detection", action="store_true",
                        help="also measure detection power: every planted bug under real stress runs (minutes)")
    parser.add_argument("--detection-seeds", type=int, default=10, metavar="N",
                        help="stress runs per planted bug and mode (aimed, random only), seeds 1..N (default 10)")
    parser.add_argument("--detection-seconds", type=float, default=10.0, metavar="S",
                        help="faulted seconds of each of those runs (default 10)")
    parser.add_argument("--detection-jobs", type=int, default=2, metavar="J",
                        help=f"detection runs at once (default 2, one per core; at most {WORKERS_PER_CORE} per core, "
                        "as --workers)")
    from takeover._internal.selftest.runs import NETWORK_DURATION

    parser.add_argument("--detection-hosts", type=int, default=0, metavar="N",
                        help="with detection: also the network era's planted bugs on PostgreSQL with N hosts, "
                             f"{NETWORK_DURATION:g} s runs under the network faults alone, one at a time, into "
                             "bench.json's detection_network (needs root; about 30 minutes for 10 seeds)")
    from takeover._internal.options import add_fanout_options

    add_fanout_options(parser)  # bench --detection's runs on a dask cluster, or shard I/N of them
    parser.add_argument("--mutants", default=None, metavar="N|all",
                        help="with --detection: the mutation score over a sample of N generated mutants of each "
                             "reference queue (default 10), or all of them (about an hour per database)")
    add_db_options(parser)


def run(args: argparse.Namespace) -> ExitCode:
    if getattr(args, "shard", None):
        if args.detection_hosts:
            raise UsageError("--detection-hosts is not sharded (its runs are few, one at a time): run it without "
                             "--shard")
        return _shard(args)
    out = Path(args.out or "bench.json")
    if out.is_dir():
        raise UsageError(f"--out {str(out)!r} is a directory; give a file name such as bench.json")
    if not out.absolute().parent.is_dir() or not os.access(out.absolute().parent, os.W_OK):
        raise UsageError(f"--out {str(out)!r}: folder {str(out.absolute().parent)!r} is missing or not writable")
    if args.detection_seeds < 1 or args.detection_jobs < 1 or not args.detection_seconds > 0:
        raise UsageError("--detection-seeds and --detection-jobs must be at least 1, --detection-seconds above 0")
    worker_count("--detection-jobs", args.detection_jobs)  # each job is a run with its own workers
    if args.repeat < 1:
        raise UsageError(f"--repeat must be at least 1, got {args.repeat}")
    mutants_sample(args)  # a bad --mutants stops here
    if args.suite_log is not None:
        return _suite(Path(args.suite_log), out)
    _check_detection_hosts(args)
    database = db_given(args)
    measure = MEASURE if database == db.DEFAULT else MEASURE_REDIS if db.kind(database) == db.REDIS \
        else MEASURE_POSTGRES
    if database == db.DEFAULT and "bridge_vs_native" in (args.only or ()):
        # On SQLite only when asked for by name: a plain `takeover bench` needs no node.
        measure = {**MEASURE, "bridge_vs_native": partial(bridge, database=db.SQLITE)}
    if database != db.DEFAULT:
        wrong = [name for name in args.only or () if name not in measure]
        if wrong or args.detection:
            raise UsageError(f"with --db {db.redact(database)} the bench measures {', '.join(measure)} (the queue's "
                             f"figures on {'Redis' if db.kind(database) == db.REDIS else 'PostgreSQL'}), not "
                             f"{', '.join(wrong) or 'detection'}; the others are SQLite's (takeover selftest --db "
                             f"{db.kind(database)} runs the planted bugs)")
    with db.serve(database, keep=args.keep_db), temp_root(SCRATCH_PREFIX):
        return _run(args, out, measure, database)


def _plan(args: argparse.Namespace) -> BenchPlan:
    return BenchPlan(only=tuple(args.only or ()), quick=bool(args.quick), repeat=args.repeat,
                     detection=bool(args.detection), detection_seeds=args.detection_seeds,
                     detection_seconds=args.detection_seconds, detection_jobs=args.detection_jobs,
                     detection_hosts=args.detection_hosts, mutants=mutants_sample(args),
                     cluster=getattr(args, "cluster", None))  # fmt: skip


def _run(args: argparse.Namespace, out: Path, measure: dict[str, Callable[..., dict[str, Any]]],
         database: str) -> ExitCode:
    quick = bool(args.quick)
    bench = measure_bench(_plan(args), measure, database)
    kept = keep_earlier(out, bench.doc)
    _with_suite(args.with_suite_log, bench.doc)
    out.write_text(json.dumps(bench.doc, indent=2) + "\n")
    if kept:
        print(f"takeover bench: kept from the earlier {out.name} (not measured this time): {', '.join(kept)}",
              file=sys.stderr)
    print_bench(bench, quick)
    print(f"wrote {out}")
    advice = quieter(bench.results)
    if advice and not quick:
        print(advice, file=sys.stderr)
    loaded = bench.loaded()
    if loaded and not quick:
        print(f"takeover bench: measured while other processes used the machine: {', '.join(loaded)}; these "
              f"figures are for direction only and the benchmarks page does not judge them: publish "
              f"(docs/bench.json) a run with nothing else running (others below {QUIET_SHARE:g} of the CPUs)",
              file=sys.stderr)  # fmt: skip
    missed = [r["name"] for r in bench.results if row_verdict(r) == MISS and r["enforced"]]
    if missed and not quick:
        print(f"takeover bench: target missed: {', '.join(missed)}", file=sys.stderr)
        return ExitCode.VIOLATED
    return ExitCode.VALID


def _with_suite(log: str | None, doc: dict[str, Any]) -> None:
    """``--with-suite-log``: the suite's time into the bench's ``doc`` beside what it measured; a log that is
    not there or was cut off is skipped, saying so (a kept earlier one stays, marked when of another commit)."""
    from takeover.benchmarks.suite_log import attach, record

    suite = None
    if log is not None:
        try:
            suite = record(Path(log), "--with-suite-log")
        except UsageError as exc:
            print(f"takeover bench: the suite's time not recorded: {exc}", file=sys.stderr)
    attach(doc, suite)
    why = (doc.get("suite") or {}).get("stale")
    if why and suite is not None:
        print(f"takeover bench: the suite's time is not this code's: {why}", file=sys.stderr)


def _suite(log: Path, out: Path) -> ExitCode:
    """``--suite-log``: the suite's time into ``out``'s ``suite`` key, everything else in it kept."""
    from takeover.benchmarks.suite_log import attach, record

    suite = record(log)
    try:
        doc = json.loads(out.read_text()) if out.exists() else {}
    except (OSError, ValueError):
        raise UsageError(f"--out {str(out)!r} is not a bench.json (not JSON): give the file the bench wrote") from None
    if not isinstance(doc, dict):
        raise UsageError(f"--out {str(out)!r} is not a bench.json (not a JSON object)")
    attach(doc, suite)  # compared with the commit of the figures already in the file
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"takeover bench: the suite took {suite['wall_s']:.0f} s ({len(suite['slowest'])} slowest tests) -> {out}")
    return ExitCode.VALID


def _shard(args: argparse.Namespace) -> ExitCode:
    """``--shard I/N``: only this shard's detection runs (run i of the bench's run order goes to shard
    i mod N + 1), their rows left in the ``--out`` folder for ``takeover merge``. The other figures are ratios
    of two workloads measured side by side in one run, and the mutation score is its own bench: a shard
    makes neither."""
    from takeover.benchmarks.detection_shard import write_detection_shard

    if not (args.detection or "detection" in (args.only or ())) or set(args.only or ()) - {"detection"}:
        raise UsageError("--shard splits the detection runs alone: give --detection (or --only detection) and no "
                         "other --only")  # fmt: skip
    if db_given(args) != db.DEFAULT:
        raise UsageError("--shard splits the detection runs, which are SQLite's: leave out --db")
    if args.out is None:
        raise UsageError("--shard needs --out DIR: the shard's folder, which takeover merge joins with the others")
    out = Path(args.out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"--out {str(out)!r} exists and is not an empty folder (with --shard it is the shard's "
                         "folder)")  # fmt: skip
    if args.detection_seeds < 1 or args.detection_jobs < 1 or not args.detection_seconds > 0:
        raise UsageError("--detection-seeds and --detection-jobs must be at least 1, --detection-seconds above 0")
    worker_count("--detection-jobs", args.detection_jobs)  # each job is a run with its own workers
    i, n = args.shard
    print(f"takeover bench: shard {i}/{n} of the detection runs (the other figures and the mutation score are not "
          "sharded)", file=sys.stderr, flush=True)  # fmt: skip
    with temp_root(SCRATCH_PREFIX):
        made = detection_runs(_plan(args), shard=args.shard)
    write_detection_shard(out, args.shard, made, bool(args.quick))
    print(f"takeover bench: shard {i}/{n}: {len(made['rows'])} detection run(s) -> {out}; join the shards with "
          "takeover merge")  # fmt: skip
    return ExitCode.VALID


def _check_detection_hosts(args: argparse.Namespace) -> None:
    """``--detection-hosts N``: only beside a detection measurement, and only where hosts can be made."""
    if not args.detection_hosts:
        return
    if args.detection_hosts < 0:
        raise UsageError(f"--detection-hosts must be an integer >= 0, got {args.detection_hosts}")
    if not (args.detection or "detection" in (args.only or [])):
        raise UsageError("--detection-hosts adds the network era's bugs to a detection measurement: give --detection "
                         "or --only detection")
    from takeover._internal.config import check_network

    check_network(db.POSTGRES, {"hosts": args.detection_hosts})


def mutants_sample(args: argparse.Namespace) -> int | None:
    """``--mutants``: a sample size, or None for every mutant (``all``)."""
    from takeover.benchmarks.mutation import DEFAULT_SAMPLE

    value = args.mutants
    if value is None:
        return DEFAULT_SAMPLE
    if value == "all":
        return None
    if not value.isdigit() or int(value) < 1:
        raise UsageError(f"--mutants takes a number of mutants (at least 1) or 'all', got {value!r}")
    return int(value)
