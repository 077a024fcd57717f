"""``takeover explore --queue Q``: random contract calls in one process, each answer judged by the spec.

Why: the scenarios test five sequences and a stress run tests what real processes happen to do; the
bugs a user writes sit behind particular short sequences neither makes (finish uncertain, then
register again; a takeover, then the old holder's heartbeat; a finish a tick past the lease). This
command tries many random sequences of the contract's calls on a fresh database each, several
actors, a few tasks, the logical clock, and judges every answer at once by the spec's model; a
departure is shrunk to a minimal sequence, printed in words, and written as a scenario file and a
pytest file exactly as ``takeover replay`` writes them (``takeover scenarios --file`` reruns it).

A thin layer over :func:`takeover.explore.explore_queue` (also ``takeover.explore()`` in the API).
Exit 0: every answer was the spec's; 1: the queue departed; 2: bad input; 130: interrupted.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

from takeover._internal import db
from takeover._internal.explorer.core import DEFAULT_EXAMPLES, DEFAULT_STEPS, ExploreResult, explore_queue
from takeover._internal.explorer.words import command, failure_lines, summary_line
from takeover._internal.options import add_explore_options, db_given
from takeover._internal.scenario.engine import DEFAULT_STEP_TIMEOUT
from takeover._internal.store import DEFAULT_BASE
from takeover.contract import reference_queue
from takeover.errors import UsageError
from takeover.exit_codes import ExitCode

HELP = "try random sequences of queue calls in one process, judge every answer by the spec, shrink a departure"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.epilog = ("Each sequence runs on a fresh SQLite file (or PostgreSQL database: --db), three actors, one to "
                     "six tasks, on a logical clock. Exit 0: every answer was the spec's; 1: the queue departed "
                     "(the shrunk sequence, a scenario file and a pytest file); 2: bad input; 130: interrupted.")
    add_explore_options(parser, DEFAULT_EXAMPLES, DEFAULT_STEPS, DEFAULT_STEP_TIMEOUT)


def out_folder(args: argparse.Namespace) -> Path:
    """The folder a departure's files go to: --out, or a new runs/explore-<time> (made only when needed)."""
    if args.out:
        out = Path(args.out)
        if out.exists() and not out.is_dir():
            raise UsageError(f"--out {str(out)!r} exists and is not a directory")
        return out
    return Path(DEFAULT_BASE) / f"explore-{time.strftime('%Y%m%d-%H%M%S')}"


def run(args: argparse.Namespace) -> ExitCode:
    database = db_given(args)
    queue = args.queue or reference_queue(database)
    out = out_folder(args)
    with db.serve(database, keep=args.keep_db):
        result = explore_queue(queue, seed=args.seed, examples=args.examples, seconds=args.seconds,
                               steps=args.steps, step_timeout=args.step_timeout, out=out,
                               example_db=args.example_db)
    if args.json:
        json.dump(result.to_json(), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        _print(result, args)
    return ExitCode(result.exit_code)


def _print(result: ExploreResult, args: argparse.Namespace) -> None:
    out = sys.stdout
    print(f"takeover explore: {result.queue} on {result.db}, seed {result.seed}", file=out)
    print(summary_line(result), file=out)
    if result.hung is not None:
        print(f"INCONCLUSIVE: {result.hung}; nothing was explored", file=out)
        return
    if result.ok:
        print("PASSED: every answer was the spec's.", file=out)
        return
    print(file=out)
    print("\n".join(failure_lines(result)), file=out)
    if result.scenario_file is not None:
        on = "" if result.db == db.DEFAULT else f" --db {result.db}"
        print(f"Scenarios: {result.scenario_file} · pytest: {result.test_file}", file=out)
        print(f"  takeover scenarios --file {result.scenario_file} --queue {shlex.quote(result.queue)}{on}   "
              "# fails until the queue is fixed", file=out)
    print(f"Again: {command(result, args.examples, args.seconds)}", file=out)
