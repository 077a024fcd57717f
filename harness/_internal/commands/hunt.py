"""``takeover hunt``: short runs on successive seeds, aimed and swarm in turn, until the first violation.

The hunt is the library's (:func:`takeover._internal.hunter.run_hunt`, whose module says why a hunt runs the way it
does and what it keeps); this module reads the options into a :class:`~takeover._internal.hunter.HuntOptions` and
hands the hunt the console.

Exit codes: 1 a violation was found; 0 the budget ran out and every run was valid; 2 bad input; 3 a
run could not be checked (or tested nothing) and no violation was found; 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys

from takeover._internal import store
from takeover._internal.config import profile_defaults, profile_names
from takeover._internal.hunter.hunt import (
    DEFAULT_BUDGET,
    DEFAULT_KEEP_VALID,
    DEFAULT_RUN_SECONDS,
    PASSED_ON,
    HuntOptions,
)
from takeover._internal.options import BY_DEST, add_db_options, add_option, default_words, shell_line
from takeover.exit_codes import ExitCode

HELP = "hunt for a bug: short runs on successive seeds, aimed and swarm in turn, until the first violation"


def configure(parser: argparse.ArgumentParser) -> None:
    defaults = profile_defaults()
    for dest in PASSED_ON:
        o = BY_DEST[dest]
        text = o.help.replace("{profiles}", ", ".join(profile_names()))
        add_option(parser, o, text + default_words(o, defaults.get(dest)))
    parser.add_argument("--seed", type=int, default=1, help="the first run's seed; each run takes the next (default 1)")
    parser.add_argument("--budget", type=float, default=DEFAULT_BUDGET, metavar="SECONDS",
                        help=f"seconds the hunt may take (default {DEFAULT_BUDGET:g}); a run is not started when it "
                             "would not finish within what is left (estimated from the longest run so far)")
    parser.add_argument("--run-seconds", type=float, default=DEFAULT_RUN_SECONDS, metavar="N",
                        help=f"seconds of faults per run, its --duration (default {DEFAULT_RUN_SECONDS:g}); its drain "
                             "and check follow")  # fmt: skip
    parser.add_argument("--out", help="the hunt's folder (default runs/hunt-<timestamp>), with a run folder per "
                                      f"seed: {store.hunt_run_name(1)}, ...")  # fmt: skip
    add_db_options(parser)
    parser.add_argument("--keep-valid", type=int, default=DEFAULT_KEEP_VALID, metavar="N",
                        help=f"valid runs whose folders are kept, the most recent (default {DEFAULT_KEEP_VALID}); the "
                             "violating run and runs that could not be checked are always kept")  # fmt: skip
    from takeover._internal.options import add_fanout_options

    add_fanout_options(parser)


def options_of(args: argparse.Namespace) -> HuntOptions:
    """The parsed command line as the library's hunt options."""
    command = shell_line(["takeover", "hunt", *sys.argv[2:]]) if len(sys.argv) > 1 else ""
    return HuntOptions(run_options={dest: getattr(args, dest, None) for dest in (*PASSED_ON, "db")}, seed=args.seed,
                       budget=args.budget, run_seconds=args.run_seconds, keep_valid=args.keep_valid, out=args.out,
                       keep_db=args.keep_db, cluster=getattr(args, "cluster", None),
                       shard=getattr(args, "shard", None), command=command)  # fmt: skip


def run(args: argparse.Namespace) -> ExitCode:
    from takeover._internal.hunter import run_hunt

    hunt = run_hunt(options_of(args), sys.stdout)
    assert hunt.code is not None
    return hunt.code
