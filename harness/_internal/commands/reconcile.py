"""``takeover reconcile RUN_DIR``: resolve a run's ``uncertain`` tasks against the service's record.

Then the run is checked again, so ``summary.json`` and the reports show what was resolved and
the invariants judge the resolved states. Exit code: the checker's.
"""

from __future__ import annotations

import argparse
import sys

from takeover._internal.store import LEDGER_FILE
from takeover.exit_codes import ExitCode

HELP = "resolve a run's uncertain tasks to done / pending by asking the service's ledger, then re-check"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.epilog = ("Tasks are resolved through the queue's optional resolve(). A queue behind --queue "
                     "\"exec:COMMAND\" has none (the JSON-lines protocol carries no resolve): its uncertain tasks "
                     "are named and left uncertain.")
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run folder (e.g. runs/latest)")
    parser.add_argument("--service-port", type=int, metavar="PORT",
                        help=f"ask a running service on 127.0.0.1:PORT instead of reading {LEDGER_FILE}")
    parser.add_argument("--no-check", action="store_true", help="resolve only; do not re-check the run")


def run(args: argparse.Namespace) -> ExitCode:
    from takeover._internal.reconcile import describe, reconcile_run
    from takeover.errors import UsageError

    if args.service_port is not None and not 0 < args.service_port < 65536:
        raise UsageError(f"--service-port must be 1-65535, got {args.service_port}")
    result = reconcile_run(args.run_dir, port=args.service_port)
    sys.stdout.write(describe(result))
    if args.no_check:
        return ExitCode.VALID
    from takeover._internal.pipeline import check_and_report

    return check_and_report(args.run_dir, out=sys.stdout).exit_code
