"""``takeover mutate``: the mutation score of takeover's checks on a queue's mechanically generated mutants.

Why: every bug the selftest plants was shaped by the people who wrote the faults that catch it, so
catching them all says little about bugs nobody anticipated. Mutants generated mechanically from the
reference queue's own SQL and Python (:mod:`takeover.mutation.generate`), every operator at every site,
each run through scenarios, explore and a 20 s stress run (:mod:`takeover.mutation.runner`), give the
honest figure: the share of non-equivalent mutants some stage kills, and how soon.

Output: a table of the mutants not killed and the score on the console; ``mutate.json`` in the output
folder (rewritten after every mutant, so an interrupted run keeps what it measured), with every
mutant's id, change (a diff), verdict, killing stage and time to kill. Survivors' stress run folders
are kept there (``runs/``) to be looked at.

Exit codes: 0 the score meets ``--min-score`` (or none was given); 1 below it; 2 bad input; 130 interrupted.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from takeover._internal import db, store
from takeover._internal.options import add_db_options, db_given
from takeover.errors import UsageError
from takeover.exit_codes import ExitCode
from takeover.mutation.measure import MUTATE_FILE, measure, read_prior, select

HELP = ("mutation score: run mechanically generated mutants of a queue module through scenarios, explore and "
        "stress; write mutate.json")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--queue", metavar="MODULE:ATTR",
                        help="the queue whose module is mutated (default: the reference queue of --db)")
    add_db_options(parser)
    parser.add_argument("--seed", type=int, default=1, help="the stress runs' (and explore's) seed (default 1)")
    parser.add_argument("--stress-seconds", type=float, default=20.0, metavar="S",
                        help="faulted seconds of each mutant's stress run (default 20)")
    parser.add_argument("--explore-examples", type=int, default=200, metavar="N",
                        help="explore's budget per mutant in examples, the same on a loaded machine (default 200)")
    parser.add_argument("--explore-seconds", type=float, default=60.0, metavar="S",
                        help="a cap on explore's wall time per mutant, a safety net only (default 60)")
    parser.add_argument("--stages", default="scenarios,explore,stress", metavar="LIST",
                        help="the stages to run, in order, comma-separated (default scenarios,explore,stress)")
    parser.add_argument("--mutants", type=int, default=None, metavar="N",
                        help="a sample of N mutants (from --seed), for a quick figure; default every mutant")
    parser.add_argument("--only", action="append", metavar="PATTERN",
                        help="only the mutants whose id matches this glob (repeatable)")
    parser.add_argument("--min-score", type=float, default=None, metavar="PERCENT",
                        help="exit 1 when the score (killed share of the non-equivalent mutants) is below this")
    parser.add_argument("--verify-equivalents", action="store_true",
                        help="stress-run the mutants the equivalence table lists as well (default: the cheap stages "
                             "only; a wrong entry could then only lower the score)")
    parser.add_argument("--list", action="store_true", help="list the generated mutants and exit")
    parser.add_argument("--resume", metavar="MUTATE_JSON",
                        help="take the stages already run from an earlier mutate.json of the same queue (a killed "
                             "mutant stays killed; a survivor runs only the stages it has not been through)")
    parser.add_argument("--out", help="output folder (default runs/mutate-<timestamp>) for mutate.json")


def check_args(args: argparse.Namespace) -> tuple[str, str, tuple[str, ...]]:
    from takeover.contract import reference_queue
    from takeover.mutation.runner import CRASH, STAGES

    database = db_given(args)
    queue = args.queue or reference_queue(database)
    if queue.count(":") != 1 or not all(queue.split(":")):
        raise UsageError(f"--queue must be MODULE:ATTR, got {queue!r}")
    stages = tuple(s.strip() for s in args.stages.split(",") if s.strip())
    wrong = [s for s in stages if s not in STAGES or s == CRASH]
    if wrong or not stages:
        raise UsageError(f"--stages takes {', '.join(s for s in STAGES if s != CRASH)}, got {args.stages!r}")
    if not args.stress_seconds > 0 or args.stress_seconds == float("inf"):
        raise UsageError(f"--stress-seconds must be a positive number of seconds, got {args.stress_seconds!r}")
    if not args.explore_seconds > 0 or args.explore_seconds == float("inf"):
        raise UsageError(f"--explore-seconds must be a positive number of seconds, got {args.explore_seconds!r}")
    if args.explore_examples < 1:
        raise UsageError(f"--explore-examples must be at least 1, got {args.explore_examples}")
    if args.mutants is not None and args.mutants < 1:
        raise UsageError(f"--mutants must be at least 1, got {args.mutants}")
    if args.min_score is not None and not 0 <= args.min_score <= 100:
        raise UsageError(f"--min-score is a percentage from 0 to 100, got {args.min_score:g}")
    return queue, database, stages


def run(args: argparse.Namespace) -> ExitCode:
    from takeover.mutation.generate import generate

    queue, database, stages = check_args(args)
    mutants = generate(queue)
    chosen = select(mutants, args.only, args.mutants, args.seed)
    if args.list:
        for m in chosen:
            print(f"{m.id}\t{m.what}")
        print(f"{len(chosen)} of {len(mutants)} mutants of {queue}", file=sys.stderr)
        return ExitCode.VALID
    prior = read_prior(args.resume, queue, args.seed, args.stress_seconds) if args.resume else None
    out = Path(args.out) if args.out else Path(store.DEFAULT_BASE) / time.strftime("mutate-%Y%m%d-%H%M%S")
    store.check_out(str(out))
    with db.serve(database, keep=args.keep_db):
        doc = measure(queue, database, chosen, out, args.seed, args.stress_seconds, args.explore_seconds, stages,
                      generated=len(mutants), command=_command(), prior=prior,
                      verify_equivalents=args.verify_equivalents, explore_examples=args.explore_examples)
    from takeover.mutation.report import print_table

    print_table(doc)
    print(f"wrote {out / MUTATE_FILE}")
    score = doc["figures"]["score"]
    if args.min_score is not None and (score is None or 100 * score < args.min_score):
        print(f"takeover mutate: score below --min-score {args.min_score:g} %", file=sys.stderr)
        return ExitCode.VIOLATED
    return ExitCode.VALID


def _command() -> str:
    return " ".join(shlex.quote(a) for a in ["takeover", *sys.argv[1:]]) if len(sys.argv) > 1 else ""
