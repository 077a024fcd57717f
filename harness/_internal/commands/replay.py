"""``takeover replay RUN_DIR``: turn a run's violations into one-process replays and minimal scenarios.

Why: real processes never interleave the same way twice, so a stress run's violation cannot be
rerun, and a fix cannot be checked against the sequence that failed. Every queue call carries the
``now`` it was judged by, so one task's calls can be replayed in this process, on a fresh SQLite
file holding only that task, on the recorded clock: the same answer every time. What reproduces is
shrunk to the fewest calls, actors and smallest numbers that still break the same invariant, and
written as a scenario file (``takeover scenarios --file``) and a pytest file.

Exit 1: the queue breaks an invariant in the replay (the scenarios fail until it is fixed); 3: the
run's violations did not reproduce in one process (a race, other tasks: the report says which and
why); 0: nothing to replay, or the tasks named replay as the spec says, or FIXED: another queue
(``--queue``, your fix) answered every violating task's recorded calls as the spec says; 2: bad input.

Why FIXED only on another queue than the run's: on the run's own queue, a violation that does not come
back in one process is a race or a matter of other tasks (exit 3, the report says which); only a
different queue answering right where the run's answered wrong is evidence of a fix. It is evidence
about these sequences, one task at a time, and the report says so: it cannot show a race.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from takeover._internal import db, store
from takeover._internal.options import (
    QUEUE_FORMS,
    add_db_options,
    add_issue_option,
    db_given,
    positive_seconds,
    shell_line,
)
from takeover._internal.replay.core import DEFAULT_REPEAT, ReplayReport, TaskReplay, check_saved, replay_run
from takeover._internal.replay.issue import ISSUE_FILE, write_issue
from takeover._internal.replay.output import report_json, write_outputs
from takeover._internal.scenario.engine import DEFAULT_STEP_TIMEOUT
from takeover.exit_codes import ExitCode

HELP = "replay a run's violating tasks in one process, shrink them, write scenarios that fail until the queue is fixed"

REPLAY_FILE = "replay.json"  # in the run folder, without --out; the pytest file goes beside it
SHOWN = 6  # tasks described in full; the rest are counted


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of 1 or more, got {text!r}")
    return value


def configure(parser: argparse.ArgumentParser) -> None:
    parser.epilog = (
        "Each task is replayed alone on a fresh temporary SQLite file (or PostgreSQL database, or empty Redis "
        "database: --db, by default the run's own), on the clock of its recorded nows; "
        "calls of unknown outcome are tried both ways. Exit 1: the queue breaks an invariant in the replay; "
        "3: the run's violations do not reproduce in one process; 0: nothing to replay, or FIXED (--queue named "
        "another queue and it answered every violating task's calls as the spec says); 2: bad input."
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run folder (e.g. runs/latest)")
    parser.add_argument("--task", action="append", metavar="ID",
                        help="replay this task (repeat for several); default: every task with a violation")
    parser.add_argument("--queue", metavar="MODULE:ATTR",
                        help=f"replay on this queue, {QUEUE_FORMS} (default: the run's, from its "
                        "config.json): your fix")
    parser.add_argument("--out", metavar="FILE",
                        help=f"write the scenarios here (default: RUN_DIR/{REPLAY_FILE}); the pytest file goes "
                        "beside it as test_<name>.py")
    parser.add_argument("--max-tasks", type=_positive_int, default=50, metavar="N",
                        help="replay at most this many violating tasks (default: 50)")
    parser.add_argument("--repeat", type=_positive_int, default=DEFAULT_REPEAT, metavar="N",
                        help=f"replay each shrunk scenario N more times to show it breaks every time "
                        f"(default: {DEFAULT_REPEAT})")
    parser.add_argument("--step-timeout", type=positive_seconds, default=DEFAULT_STEP_TIMEOUT, metavar="SECONDS",
                        help="give each queue call this long; one that does not return stops the replay "
                        f"(default: {DEFAULT_STEP_TIMEOUT:g})")
    parser.add_argument("--json", action="store_true", help="print the replay's findings as JSON")
    add_issue_option(parser)
    add_db_options(parser)


def run(args: argparse.Namespace) -> ExitCode:
    database = db_given(args) if args.db else recorded_db(args.run_dir)
    with db.serve(database, keep=args.keep_db):
        return _run(args)


def recorded_db(run_dir: str) -> str:
    """The database the run used (config.json's ``db``; SQLite when it names none, or cannot be read:
    replay_run then says what is wrong with the folder)."""
    try:
        value = store.read_config(run_dir).get("db", db.DEFAULT)
        return db.check(value)
    except Exception:  # noqa: BLE001
        return db.DEFAULT


def _run(args: argparse.Namespace) -> ExitCode:
    report = replay_run(args.run_dir, args.task, args.queue, repeat=args.repeat,
                        step_timeout=args.step_timeout, max_tasks=args.max_tasks)
    check_saved(report, Path(args.out) if args.out else report.run_dir / REPLAY_FILE, args.step_timeout)
    files = None
    ids: dict[tuple[str, str], str] = {}
    if any(tr.shrunk for tr in report.tasks):
        out = Path(args.out) if args.out else report.run_dir / REPLAY_FILE
        scenario_file, test_file, ids = write_outputs(report, out)
        files = (scenario_file, test_file)
    issue = _issue(args, report, files)
    if args.json:
        doc = report_json(report, ids, files)
        if args.issue is not None:
            doc["issue_file"] = str(issue) if issue else None
        json.dump(doc, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        _print(report, ids, files)
        if args.issue is not None:
            print(f"Bug report: {issue}" if issue else "No bug report: nothing reproduced in one process.")
    return exit_code(report)


def _issue(args: argparse.Namespace, report: ReplayReport, files: tuple[Path, Path] | None) -> Path | None:
    """With --issue: the bug report written from the scenario file (None when there is none)."""
    if args.issue is None or files is None:
        return None
    out = Path(args.issue) if args.issue else files[0].with_name(ISSUE_FILE)
    return write_issue(report.queue, files[0], out, report.run_dir)


def exit_code(report: ReplayReport) -> ExitCode:
    if report.reproduced or (report.saved is not None and report.saved.failed):
        return ExitCode.VIOLATED
    if report.fixed:
        return ExitCode.VALID
    if any(tr.flagged for tr in report.tasks):
        return ExitCode.INCONCLUSIVE
    return ExitCode.VALID


def fixed_lines(report: ReplayReport) -> list[str]:
    """What FIXED proves, and what it does not, in words."""
    broken = sorted({inv for tr in report.tasks for inv in tr.flagged})
    placements = sum(tr.tried for tr in report.tasks)
    again = stress_line(report, db.current().value)
    lines = [
        f"FIXED on {report.queue}: every call the run recorded on its {_plural(len(report.tasks), 'violating task')} "
        f"(where {report.recorded_queue} broke {', '.join(broken)}), replayed alone in one process "
        f"({_plural(placements, 'placement')} in all, calls of unknown outcome tried both ways), is answered "
        "as the spec says.",
        "  This proves these recorded sequences no longer break the queue. It does not prove the queue correct: "
        "a one-task replay makes no two calls at once (races), holds no other tasks, and tries only what the run "
        f"did. Run stress on the fix too: {again}",
    ]
    if report.saved is not None:
        lines.insert(1, f"  The shrunk scenario(s) of {report.saved.file} pass on it too: "
                        f"{', '.join(report.saved.passed)}.")
    return lines


def stress_line(report: ReplayReport, database: str) -> str:
    """The stress run to give the fix: its queue, the run's seed and ``database`` (the --db replayed on),
    quoted as every reproduce line is (an ``exec:node queue.js`` queue stays one word)."""
    seed = store_seed(report)
    parts = ["takeover", "stress", "--queue", report.queue]
    if seed is not None:
        parts += ["--seed", str(seed)]
    if database != db.DEFAULT:
        parts += ["--db", db.redact(database)]
    return shell_line(parts)


def store_seed(report: ReplayReport) -> int | None:
    """The run's seed (config.json), to run the fix under the same faults; None when unreadable."""
    try:
        seed = store.read_config(report.run_dir).get("seed")
    except Exception:  # noqa: BLE001
        return None
    return seed if isinstance(seed, int) else None


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}es" if word.endswith("s") else f"{n} {word}s"


def _task_block(tr: TaskReplay, ids: dict[tuple[str, str], str], own_queue: bool = True) -> list[str]:
    tc = tr.calls
    processes = len({c.process for c in tc.calls})
    head = f"{tr.task} · " + ("checker: " + ", ".join(tr.flagged) if tr.flagged else "no violation in the run")
    lines = [head, f"  history: {_plural(len(tc.calls), 'call')} by {_plural(processes, 'process')}, "
                   f"{len(tc.indeterminate)} of unknown outcome; {_plural(tr.tried, 'placement')} replayed"]
    if tr.outcome is not None:
        same, total = tr.matched
        lines.append(f"  replayed {tr.variant}: {same} of {total} answers as recorded")
        seen: set[str] = set()
        for d in tr.outcome.departures:  # each once: a lying snapshot lies again at every later step
            if not set(d.invariants) <= seen:
                lines.append(f"  departs at step {d.index}: {d.what}")
                seen |= set(d.invariants)
    if tr.reproduced:
        lines.append("  reproduced: " + ", ".join(tr.reproduced))
    for inv in tr.reproduced:
        sh = tr.shrunk.get(inv)
        if sh is not None:
            actors = len({s["actor"] for s in sh.steps if s.get("actor")})
            broke, of = tr.repeats[inv]
            lines.append(f"    {inv}: shrunk to {_plural(len(sh.steps), 'step')}, {_plural(actors, 'actor')}, "
                         f"lease {sh.lease:g} ({sh.replays} replays); breaks it {broke} of {of} times: "
                         f"scenario {ids.get((tr.task, inv))}")
        elif inv in tr.same_as:
            lines.append(f"    {inv}: as task {tr.same_as[inv]}, scenario {ids.get((tr.same_as[inv], inv))}")
    for inv in tr.missed:
        fixed = not own_queue and tr.clean and inv not in tr.beyond
        lines.append(f"  {'not broken here' if fixed else 'NOT reproduced'} {inv}: {tr.reasons[inv]}")
    if not tr.flagged and not tr.reproduced:
        lines.append("  the queue answers every call as the spec says")
    return lines


def _print(report: ReplayReport, ids: dict[tuple[str, str], str], files: tuple[Path, Path] | None) -> None:
    out = sys.stdout
    whose = "the run's queue" if report.queue_from_run else f"not the run's queue, {report.recorded_queue}"
    print(f"takeover replay: {report.run_dir} on {report.queue} ({whose})", file=out)
    if not report.tasks:
        print("Nothing to replay: the run broke no invariant (name a task with --task).", file=out)
        return
    fresh = db.FRESH[db.current().kind]
    print(f"{len(report.tasks)} task(s), each replayed alone on a fresh {fresh}, on the clock of its "
          f"recorded nows ({report.replays} replays in all).", file=out)
    if report.hung:
        print(f"STOPPED: the queue hung in a replay ({report.hung}).", file=out)
    if report.skipped:
        why = "the replay stopped" if report.hung else "--max-tasks"
        print(f"{report.skipped} more violating task(s) not replayed ({why}).", file=out)
    shown = 0
    rest: Counter[str] = Counter()
    for tr in report.tasks:
        if shown < SHOWN or tr.shrunk:
            print(file=out)
            print("\n".join(_task_block(tr, ids, report.own_queue)), file=out)
            shown += 1
        else:
            what = ("reproduced " + ", ".join(tr.reproduced)) if tr.reproduced else "not reproduced"
            rest[what] += 1
    if rest:
        print(file=out)
        print(f"{sum(rest.values())} more task(s): " + "; ".join(f"{what} ({n})" for what, n in rest.items()),
              file=out)
    print(file=out)
    if files is not None:
        print(f"Scenarios: {files[0]} · pytest: {files[1]}", file=out)
        on = [] if db.current().value == db.DEFAULT else ["--db", db.redact(db.current().value)]
        print(f"  {shell_line(['takeover', 'scenarios', '--file', str(files[0]), '--queue', report.queue, *on])}   "
              "# fails until the queue is fixed", file=out)
    n, total = len(report.reproduced), len(report.tasks)
    saved = report.saved
    if saved is not None and saved.failed:
        print(f"NOT FIXED: the run's calls replay clean on {report.queue}, but {len(saved.failed)} of the shrunk "
              f"scenario(s) of {saved.file} still fail on it:", file=out)
        for failure in saved.failed:
            print(f"  {failure}", file=out)
        print(f"  takeover scenarios --file {saved.file} --queue {report.queue}   # step by step", file=out)
    elif n:
        print(f"REPRODUCED in one process: {n} of {total} task(s).", file=out)
    elif report.fixed:
        print("\n".join(fixed_lines(report)), file=out)
    elif any(tr.flagged for tr in report.tasks):
        print(f"NOT REPRODUCED in one process: 0 of {total} task(s) (see why above).", file=out)
        beyond = sorted({inv for tr in report.tasks for inv in tr.beyond})
        if not report.own_queue and beyond:
            print(f"  Not FIXED either: a one-task replay cannot judge {', '.join(beyond)} here (see why above); "
                  f"run stress on {report.queue}.", file=out)
    else:
        print("The queue answers every replayed call as the spec says.", file=out)
