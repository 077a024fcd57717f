"""``takeover selftest``: prove the checker's power — every planted bug caught, the reference passes.

The command parses its options and calls the selftest (takeover._internal.selftest, whose docstring says what a run
is and when a bug counts as caught).
"""

from __future__ import annotations

import argparse

from takeover._internal import db
from takeover._internal.options import add_db_options, db_given
from takeover._internal.selftest.runs import DURATION, NETWORK_DURATION, PROFILE, QUICK, QUICK_DURATION, QUICK_PROFILE
from takeover.exit_codes import ExitCode

HELP = "run planted-bug queues and the reference queue under short stress runs: is every bug caught?"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true",
                        help=f"only {', '.join(QUICK)} and one reference seed, {QUICK_DURATION:g} s faulted phases of "
                             f"profile {QUICK_PROFILE} (for the test suite)")
    parser.add_argument("--seeds", type=int, default=3,
                        help="seeds for the reference queue; a planted bug may use up to this many tries (default 3)")
    parser.add_argument("--profile",
                        help=f"stress profile for every run (default {PROFILE}; {QUICK_PROFILE} with --quick)")
    parser.add_argument("--duration", type=float, metavar="SECONDS",
                        help=f"faulted seconds of every run (default {DURATION:g} with the default profile, "
                             f"{QUICK_DURATION:g} with --quick, the profile's own with --profile)")
    parser.add_argument("--only", action="append", default=[], metavar="NAME",
                        help="run only this planted queue (repeatable)")
    parser.add_argument("--keep", metavar="DIR", help="keep the run folders in DIR (default: a temp dir)")
    parser.add_argument("--hosts", type=int, default=0, metavar="N",
                        help="the network era's planted bugs instead (takeover.queues.planted_network), each run on N "
                             f"hosts under the network faults alone, {NETWORK_DURATION:g} s unless --duration; needs "
                             "--db postgres and root")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    add_db_options(parser)
    from takeover._internal.options import add_fanout_options

    add_fanout_options(parser)  # --shard I/N needs --keep DIR: the shard's folder, for takeover merge


def run(args: argparse.Namespace) -> ExitCode:
    from takeover._internal.fanout.launch import check_cluster
    from takeover._internal.selftest.runs import run_selftest

    database = db_given(args)
    check_cluster(args.cluster, db=database)
    with db.serve(database, keep=args.keep_db):
        return run_selftest(args, database)
