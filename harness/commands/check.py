"""``takeover check RUN_DIR``: re-check a stored run without re-running it."""

from __future__ import annotations

import argparse

from takeover.exit_codes import ExitCode
from takeover.store import JUNIT_XML, REPORT_MD, SUMMARY_FILE

HELP = "check a stored run folder: invariants, duplicates, reports (exit 0 valid, 1 violated, 3 inconclusive)"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run folder (e.g. runs/latest)")
    add_duplicate_gate(parser)
    parser.add_argument("--json", action="store_true", help=f"print {SUMMARY_FILE} instead of the short summary")
    parser.add_argument("--no-reports", action="store_true",
                        help=f"write {SUMMARY_FILE} only (skip {REPORT_MD}/html and {JUNIT_XML})")


def run(args: argparse.Namespace) -> ExitCode:
    import sys

    from takeover.pipeline import check_and_report

    return check_and_report(args.run_dir, fail_on_duplicates=args.fail_on_duplicates,
                            max_duplicates_per_1000=args.max_duplicates_per_1000, as_json=args.json,
                            reports=not args.no_reports, out=sys.stdout).exit_code


def add_duplicate_gate(parser: argparse.ArgumentParser) -> None:
    """The two options of the duplicate gate (takeover.checker.gate), for every command that checks a run."""
    parser.add_argument("--fail-on-duplicates", action="store_true",
                        help="exit 1 when a side effect was repeated that the lease and the --remedy promise to "
                             "prevent (with --remedy none: two holders at once; fencing: also a stale generation "
                             "acting; idempotency-key: any repeat)")
    parser.add_argument("--max-duplicates-per-1000", type=_rate, metavar="N",
                        help="exit 1 when duplicate side effects of any cause exceed N per 1000 tasks")


def _rate(text: str) -> float:
    """argparse turns the ArgumentTypeError into one line naming the option (exit 2)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text!r}")
    return value
