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
import fnmatch
import json
import os
import random
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from takeover import db, store
from takeover.errors import UsageError
from takeover.exit_codes import ExitCode
from takeover.options import add_db_options, db_given

HELP = ("mutation score: run mechanically generated mutants of a queue module through scenarios, explore and "
        "stress; write mutate.json")
MUTATE_FILE = "mutate.json"


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


def select(mutants: list[Any], only: list[str] | None, sample: int | None, seed: int) -> list[Any]:
    """The mutants to run: those matching ``only``, then a sample of ``sample`` of them (in their order)."""
    chosen = [m for m in mutants if not only or any(fnmatch.fnmatchcase(m.id, p) for p in only)]
    if only and not chosen:
        raise UsageError(f"--only {' '.join(only)} matches no mutant (see takeover mutate --list)")
    if sample is not None and sample < len(chosen):
        keep = set(random.Random(seed).sample(range(len(chosen)), sample))
        chosen = [m for i, m in enumerate(chosen) if i in keep]
    return chosen


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


def read_prior(path: str, queue: str, seed: int, stress_seconds: float) -> dict[str, dict[str, Any]]:
    """The mutants of an earlier mutate.json, by id; UsageError unless it is one of the same queue and runs."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"--resume {path!r}: cannot read it as a mutate.json: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("mutants"), list):
        raise UsageError(f"--resume {path!r} is not a mutate.json (no mutants list)")
    same = (doc.get("queue"), doc.get("seed"), doc.get("stress_seconds")) == (queue, seed, stress_seconds)
    if not same:
        raise UsageError(f"--resume {path!r} is of {doc.get('queue')} (seed {doc.get('seed')}, stress "
                         f"{doc.get('stress_seconds')} s), not of {queue} (seed {seed}, stress {stress_seconds:g} s)")
    return {m["id"]: m for m in doc["mutants"] if isinstance(m, dict) and "id" in m}


def measure(queue: str, database: str, mutants: list[Any], out: Path, seed: int, stress_seconds: float,
            explore_seconds: float, stages: tuple[str, ...], *, generated: int, command: str = "",
            progress: bool = True, prior: dict[str, dict[str, Any]] | None = None,
            verify_equivalents: bool = False, explore_examples: int = 200) -> dict[str, Any]:
    """Run ``mutants`` (inside a served ``database``) and write ``out/mutate.json`` after each; the document."""
    import takeover.pipeline  # noqa: F401 - the checker loaded before the first run (see takeover hunt)
    from takeover.mutation.equivalent import EQUIVALENT
    from takeover.mutation.report import figures
    from takeover.mutation.runner import STRESS, Runner, Settings

    out.mkdir(parents=True, exist_ok=True)
    settings = Settings(seed=seed, stress_seconds=stress_seconds, explore_seconds=explore_seconds, stages=stages,
                        database=database, verify_equivalents=verify_equivalents, explore_examples=explore_examples)
    doc: dict[str, Any] = {
        "queue": queue, "db": db.redact(database), "seed": seed, "stress_seconds": stress_seconds,
        "explore_seconds": explore_seconds, "explore_examples": explore_examples,
        "stages": list(stages), "generated": generated, "run": len(mutants),
        "command": command, "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "load_avg": [round(x, 2) for x in os.getloadavg()], "verify_equivalents": verify_equivalents,
        "status": "running",
    }  # fmt: skip
    outcomes = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="takeover-mutants-") as tmp, \
            Runner(Path(tmp), out / "runs", settings, EQUIVALENT) as runner:
        try:
            if STRESS in stages:
                if progress:
                    print("reference: a stress run of the queue as it is ...", file=sys.stderr, flush=True)
                doc["reference"] = runner.baseline(queue)
                if doc["reference"]["verdict"] == "INVALID":
                    print(f"takeover mutate: the queue as it is failed its stress run ({doc['reference']['detail']}): "
                          "a kill by stress says nothing", file=sys.stderr, flush=True)
            for i, mutant in enumerate(mutants, start=1):
                outcome = runner.run(mutant, (prior or {}).get(mutant.id))
                outcomes.append(outcome)
                if progress:
                    where = f" by {outcome.stage}" if outcome.stage else ""
                    when = "" if outcome.time_to_kill_s is None else f" in {outcome.time_to_kill_s:.2f} s"
                    print(f"[{i}/{len(mutants)}] {mutant.id}: {outcome.verdict}{where}{when}", file=sys.stderr,
                          flush=True)
                _write(out, doc, outcomes, figures, started)
        except KeyboardInterrupt:
            doc["status"] = "interrupted"
            _write(out, doc, outcomes, figures, started)
            raise
    doc["status"] = "finished"
    return _write(out, doc, outcomes, figures, started)


def _write(out: Path, doc: dict[str, Any], outcomes: list[Any], figures: Any, started: float) -> dict[str, Any]:
    doc["elapsed_s"] = round(time.monotonic() - started, 1)
    doc["figures"] = figures(outcomes)
    doc["mutants"] = [o.to_json() for o in outcomes]
    tmp = out / (MUTATE_FILE + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    tmp.replace(out / MUTATE_FILE)
    return doc


def _command() -> str:
    return " ".join(shlex.quote(a) for a in ["takeover", *sys.argv[1:]]) if len(sys.argv) > 1 else ""
