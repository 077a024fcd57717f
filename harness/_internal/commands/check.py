"""``takeover check RUN_DIR``: re-check a stored run without re-running it."""

from __future__ import annotations

import argparse

from takeover._internal.options import add_duplicate_gate
from takeover._internal.store import JUNIT_XML, REPORT_MD, SUMMARY_FILE
from takeover.exit_codes import ExitCode

HELP = "check a stored run folder: invariants, duplicates, reports (exit 0 valid, 1 violated, 3 inconclusive)"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run folder (e.g. runs/latest)")
    add_duplicate_gate(parser)
    parser.add_argument("--json", action="store_true", help=f"print {SUMMARY_FILE} instead of the short summary")
    parser.add_argument("--no-reports", action="store_true",
                        help=f"write {SUMMARY_FILE} only (skip {REPORT_MD}/html and {JUNIT_XML})")


def run(args: argparse.Namespace) -> ExitCode:
    import sys

    from takeover._internal.pipeline import check_and_report

    return check_and_report(args.run_dir, fail_on_duplicates=args.fail_on_duplicates,
                            max_duplicates_per_1000=args.max_duplicates_per_1000, as_json=args.json,
                            reports=not args.no_reports, out=sys.stdout).exit_code


