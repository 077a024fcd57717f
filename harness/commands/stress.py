"""``takeover stress``: one run under real faults, recorded, then checked.

Everything that can be wrong with the input is found before the run folder exists: the profile,
every value, the queue (opened once on a scratch file and checked against the contract) and
``--out``. Then the run, with live progress; then the checker (``takeover.checker``), whose exit
code is the command's. Without a checker installed, a summary from the run's own counts.
"""

from __future__ import annotations

import argparse
import sys

from takeover.config import profile_defaults, profile_names
from takeover.exit_codes import ExitCode
from takeover.options import (
    NO_FAULTS_OPTION,
    RECONCILE_OPTION,
    Command,
    add_db_options,
    add_duplicate_gate,
    add_option,
    add_run_options,
    db_given,
)
from takeover.stress_run import resolve, run_stress

HELP = "run workers, a fault injector and an external service against a queue; record and check"


def configure(parser: argparse.ArgumentParser, command: Command = "stress") -> None:
    """Every option of the command (takeover.options.STRESS_OPTIONS, in its order): the run options, the
    database, then the flags of the stress command itself.

    ``takeover soak`` builds its parser with this too (``command="soak"``); it checks each segment
    as it ran, so ``--reconcile`` is kept there only to be refused with a reason.
    """
    add_run_options(parser, command, profile_names(), profile_defaults())
    add_db_options(parser)
    add_option(parser, NO_FAULTS_OPTION)
    add_option(parser, RECONCILE_OPTION, None if command == "stress" else argparse.SUPPRESS)
    add_duplicate_gate(parser)

def run(args: argparse.Namespace) -> ExitCode:
    """Parse, then the library's one stress run (takeover.stress_run.run_stress), printing as it goes."""
    result = run_stress(resolve(args), database=db_given(args), out=args.out, keep_db=args.keep_db,
                        reconcile=getattr(args, "reconcile", False), fail_on_duplicates=args.fail_on_duplicates,
                        max_duplicates_per_1000=args.max_duplicates_per_1000, console=sys.stdout,
                        progress=sys.stderr)  # fmt: skip
    return ExitCode(result.exit_code)
