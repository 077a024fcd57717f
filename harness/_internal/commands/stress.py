"""``takeover stress``: one run under real faults, recorded, then checked.

Everything that can be wrong with the input is found before the run folder exists: the profile,
every value, the queue (opened once on a scratch file and checked against the contract) and
``--out``. Then the run, with live progress; then the checker (``takeover._internal.checker``), whose exit
code is the command's. Without a checker installed, a summary from the run's own counts.
"""

from __future__ import annotations

import argparse
import sys

from takeover._internal.config import profile_defaults, profile_names
from takeover._internal.options import add_stress_options, db_given
from takeover._internal.stress_run import resolve, run_stress
from takeover.exit_codes import ExitCode

HELP = "run workers, a fault injector and an external service against a queue; record and check"


def configure(parser: argparse.ArgumentParser) -> None:
    """Every option of the command (takeover._internal.options.add_stress_options)."""
    add_stress_options(parser, "stress", profile_names(), profile_defaults())


def run(args: argparse.Namespace) -> ExitCode:
    """Parse, then the library's one stress run (takeover._internal.stress_run.run_stress), printing as it goes."""
    result = run_stress(resolve(args), database=db_given(args), out=args.out, keep_db=args.keep_db,
                        reconcile=getattr(args, "reconcile", False), fail_on_duplicates=args.fail_on_duplicates,
                        max_duplicates_per_1000=args.max_duplicates_per_1000, console=sys.stdout,
                        progress=sys.stderr)  # fmt: skip
    return ExitCode(result.exit_code)
