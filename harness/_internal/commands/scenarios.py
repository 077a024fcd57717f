"""``takeover scenarios``: replay the spec's S1–S5 against a queue and show where it departs.

Why a transcript and not just a verdict: the scenarios are how people learn the lease semantics
(takeover at the boundary, stale generations, uncertain). Each step is printed with what it
returned, the state the queue's own snapshot shows, and the spec's reason, in English or in the
original document's language; a step that differs says what was expected and what came back.

Why ``--step-timeout``: the queue is the user's code and may deadlock. Every queue call gets that
many seconds; one that does not return fails its step, the rest of that scenario is shown as not
run (the queue's state is unknown), the other scenarios still run, and the command exits 1 with
its verdict instead of hanging until CI kills the job. Ctrl-C during a hung call exits 130 at once.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from takeover._internal import db
from takeover._internal.options import QUEUE_FORMS, add_db_options, add_issue_option, db_given, positive_seconds
from takeover._internal.replay.issue import ISSUE_FILE, write_issue
from takeover._internal.scenario.engine import DEFAULT_STEP_TIMEOUT, LANGS
from takeover._internal.scenario.file import load_scenario_file
from takeover._internal.scenario.replay import results_to_json, run_scenarios
from takeover.contract import POSTGRES_REFERENCE_QUEUE, REFERENCE_QUEUE, reference_queue
from takeover.errors import UsageError
from takeover.exit_codes import ExitCode
from takeover.reports.transcript import print_transcript

HELP = "replay the spec's five reference scenarios (S1-S5) against a queue and check every step"

def configure(parser: argparse.ArgumentParser) -> None:
    parser.epilog = (
        "Each scenario runs on a fresh temporary SQLite file, or with --db a fresh PostgreSQL database or an "
        "empty Redis database (removed or emptied afterwards); 'worker exits' closes the queue and calls "
        "ATTR(database) again. "
        "A queue call that does not return within "
        "--step-timeout fails its step and stops that scenario (the others still run). Exit 0: every "
        "step matches the spec; 1: a step differs or hung (listed under Mismatches); 2: bad input; "
        "130: interrupted."
    )
    parser.add_argument(
        "--queue",
        default=None,
        metavar="MODULE:ATTR",
        help=f"the queue to check, {QUEUE_FORMS}; ATTR(database) builds it (default: the queue a --file names, else "
        f"{REFERENCE_QUEUE}, or {POSTGRES_REFERENCE_QUEUE} with --db postgres or a URL)",
    )
    add_db_options(parser)
    parser.add_argument("--json", action="store_true", help='print {"scenarios": [...]} shaped like scenarios.json')
    parser.add_argument(
        "--lang", choices=LANGS, default="en", help="transcript language: en, or zh (the original document's)"
    )
    parser.add_argument(
        "--scenario",
        action="append",
        metavar="ID",
        help="replay only this scenario (S1..S5, or an id of --file); repeat the option for several",
    )
    parser.add_argument(
        "--file",
        metavar="FILE",
        help="run the scenarios of FILE (the format of the spec's scenarios.json; `takeover replay` "
        "writes one) instead of the spec's five",
    )
    parser.add_argument(
        "--step-timeout",
        type=positive_seconds,
        default=DEFAULT_STEP_TIMEOUT,
        metavar="SECONDS",
        help="give each queue call this long before its step fails as hung "
        f"(default: {DEFAULT_STEP_TIMEOUT:g})",
    )
    add_issue_option(parser)  # with --file: the report of a committed finding (docs/analyses/LIBRARY/*.issue.md)


def run(args: argparse.Namespace) -> ExitCode:
    if getattr(args, "issue", None) is not None and not getattr(args, "file", None):
        raise UsageError("--issue needs --file: the report carries the scenario file it is written from")
    doc = load_scenario_file(args.file) if getattr(args, "file", None) else None
    # A file `takeover replay` wrote names the queue it broke: by default its scenarios run there.
    database = db_given(args)
    args.queue = args.queue or (doc or {}).get("queue") or reference_queue(database)
    with db.serve(database, keep=args.keep_db):
        results = run_scenarios(args.queue, args.scenario, args.step_timeout, doc=doc)
        issue = _issue(args)
    ok = all(r.ok for r in results)
    if args.json:
        out = results_to_json(results, args.queue, args.step_timeout, doc=doc)
        json.dump(out, sys.stdout, ensure_ascii=False, indent=1)
        sys.stdout.write("\n")
        sys.stdout.flush()
    else:
        print_transcript(results, args.queue, args.lang, args.step_timeout, doc=doc)
    if getattr(args, "issue", None) is not None:
        print(f"Bug report: {issue}" if issue else "No bug report: the file matches the spec in every step.",
              file=sys.stderr if args.json else sys.stdout)
    return ExitCode.VALID if ok else ExitCode.VIOLATED


def _issue(args: argparse.Namespace) -> Path | None:
    """With --issue: the bug report of --file's departures, replayed once more on the same server (None, and
    nothing written, when the file no longer departs). Why here too, not only in ``takeover replay``: a
    finding committed under docs/analyses/ is a scenario file, and its report is made from that file."""
    if getattr(args, "issue", None) is None:
        return None
    out = Path(args.issue) if args.issue else Path(args.file).with_name(ISSUE_FILE)
    return write_issue(args.queue, Path(args.file), out)
