"""``takeover stress``: one run under real faults, recorded, then checked.

Everything that can be wrong with the input is found before the run folder exists: the profile,
every value, the queue (opened once on a scratch file and checked against the contract) and
``--out``. Then the run, with live progress; then the checker (``takeover.checker``), whose exit
code is the command's. Without a checker installed, a summary from the run's own counts.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from takeover import db, store, swarm
from takeover.config import RunConfig, profile_names
from takeover.errors import UsageError
from takeover.exit_codes import ExitCode
from takeover.options import (
    AIMED_FAULTS,
    NEMESIS_FAULTS,
    Command,
    add_db_options,
    add_run_options,
    db_given,
)
from takeover.stress_run import check_queue, resolve

HELP = "run workers, a fault injector and an external service against a queue; record and check"

# Ctrl-C while the checker runs must keep the run and say how to check it. A test that presses it
# on a line printed just before the check races the check: on a loaded machine the test reads the
# line late and the check is over first. With this variable set (to seconds; no user sets a
# TAKEOVER_TEST_ name by accident) the command says so on stderr and waits that long where the
# check starts, so the test's Ctrl-C lands there every time.
HOLD_BEFORE_CHECK_ENV = "TAKEOVER_TEST_HOLD_BEFORE_CHECK"


def configure(parser: argparse.ArgumentParser, command: Command = "stress") -> None:
    """The run options (declared in takeover.options), then the flags of the stress command itself.

    ``takeover soak`` builds its parser with this too (``command="soak"``); it checks each segment
    as it ran, so ``--reconcile`` is kept there only to be refused with a reason.
    """
    add_run_options(parser, command, profile_names())
    add_db_options(parser)
    parser.add_argument("--no-faults", action="store_true", help="set every fault rate and the clock skew to 0")
    reconcile = ("after the run, resolve uncertain tasks against the service's ledger (see takeover reconcile), "
                 "before the check")  # fmt: skip
    parser.add_argument("--reconcile", action="store_true",
                        help=reconcile if command == "stress" else argparse.SUPPRESS)  # fmt: skip
    from takeover.commands.check import add_duplicate_gate

    add_duplicate_gate(parser)


def run(args: argparse.Namespace) -> ExitCode:
    cfg = resolve(args)
    store.check_out(args.out)
    with db.serve(db_given(args), keep=args.keep_db) as host:
        check_queue(cfg.queue)
        run_dir = store.create(args.out)
        with host.database(run_dir) as database:
            return _run(args, dataclasses.replace(cfg, out=str(run_dir)), run_dir, database)


def _run(args: argparse.Namespace, cfg: RunConfig, run_dir: Path, database: str) -> ExitCode:
    """The run on its database, then the verdict, while the database still exists (--reconcile reads it)."""
    from takeover.run.coordinator import Coordinator
    from takeover.run.progress import ProgressDisplay
    from takeover.workloads.worker import worker_main

    out = sys.stdout
    print(f"takeover stress: run folder {run_dir}", file=out)
    if cfg.swarm:
        print(f"swarm mix (seed {cfg.seed}): {swarm.describe(cfg)}", file=out)
    print(f"reproduce with: {cfg.command()}", file=out, flush=True)
    with ProgressDisplay(sys.stderr) as display:
        result = Coordinator(cfg, run_dir, worker=worker_main, on_progress=display.update, database=database).run()
    try:
        if getattr(args, "reconcile", False) and not result.interrupted:
            from takeover.reconcile import describe, reconcile_run

            out.write(describe(reconcile_run(run_dir, database=database)))
        code = finish_run(result, fail_on_duplicates=args.fail_on_duplicates,
                          max_duplicates_per_1000=args.max_duplicates_per_1000, out=out)
        print(f"run folder: {run_dir}", file=out)
        print(f"reproduce with: {cfg.command()}", file=out, flush=True)
    except KeyboardInterrupt:  # the run is complete and kept: only the verdict (or its printing) is missing
        print(f"takeover stress: interrupted after the run; the run is kept, check it with: "
              f"takeover check {run_dir}", file=sys.stderr)  # fmt: skip
        return ExitCode.INTERRUPTED
    if result.interrupted:
        # The verdict above covers what was recorded; the run itself did not complete.
        print("takeover stress: interrupted; what was recorded is kept and was checked", file=sys.stderr)
        return ExitCode.INTERRUPTED
    return code


def finish_run(result: Any, *, fail_on_duplicates: bool, out: Any,
               max_duplicates_per_1000: float | None = None) -> ExitCode:
    """Hand the run to the checker when it is installed; otherwise summarise our own counts."""
    print_run_summary(result, out)
    try:
        from takeover.pipeline import check_and_report
    except Exception as exc:  # noqa: BLE001 - a broken checker must not hide the run
        if not isinstance(exc, ImportError):
            print(f"takeover stress: the checker failed to import ({type(exc).__name__}: {exc})", file=sys.stderr)
        print("(takeover.checker is not installed: the run was recorded but not checked)", file=out)
        return ExitCode.VALID
    _hold_before_check()
    try:
        return check_and_report(result.run_dir, fail_on_duplicates=fail_on_duplicates,
                                max_duplicates_per_1000=max_duplicates_per_1000, out=out, confirm=True).exit_code
    except UsageError:
        raise
    except Exception as exc:  # noqa: BLE001 - the run is kept; say why there is no verdict
        print(f"takeover stress: the checker failed on {result.run_dir}: {type(exc).__name__}: {exc}; "
              f"re-check later with: takeover check {result.run_dir}", file=sys.stderr)  # fmt: skip
        return ExitCode.INCONCLUSIVE


def _hold_before_check() -> None:
    """The test hook described at ``HOLD_BEFORE_CHECK_ENV``; nothing at all when it is not set."""
    seconds = os.environ.get(HOLD_BEFORE_CHECK_ENV)
    if seconds:
        print(f"takeover stress: holding {seconds}s before the check ({HOLD_BEFORE_CHECK_ENV} is set)",
              file=sys.stderr, flush=True)  # fmt: skip
        time.sleep(float(seconds))


def ledger_counts(run_dir: Path) -> dict[str, int]:
    path = run_dir / store.LEDGER_FILE
    if not path.exists():
        return {}
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        row = conn.execute(
            "SELECT COUNT(*), COALESCE(SUM(performed), 0), COALESCE(SUM(reply = 'lost'), 0) FROM actions"
        ).fetchone()
        dup = conn.execute(
            "SELECT COUNT(*), COALESCE(SUM(n - 1), 0) FROM "
            "(SELECT COUNT(*) AS n FROM actions WHERE performed = 1 GROUP BY task_id HAVING n > 1)"
        ).fetchone()
    except sqlite3.Error:
        return {}
    finally:
        conn.close()
    return {"requests": row[0], "performed": row[1], "lost": row[2], "dup_tasks": dup[0], "extra": dup[1]}


def print_run_summary(result: Any, out: Any) -> None:
    """What the run itself saw: enough to judge a run even before the checker reads it."""
    cfg, t = result.config, result.tally
    states = ", ".join(f"{n} {s}" for s, n in sorted(result.states.items())) or "no snapshot"
    print(f"\nrun: {result.elapsed:.1f}s, {cfg.workers} workers, {result.spawned} incarnations, "
          f"lease {cfg.lease:g}s, seed {cfg.seed}", file=out)  # fmt: skip
    print(f"tasks: {result.registered} registered; final states: {states}", file=out)
    if result.snapshot_error:
        print(f"  snapshot failed: {result.snapshot_error}", file=out)
    # An interrupted run never finished its drain: unfinished tasks and missing faults are expected
    # there, and saying otherwise would send the user after a bug that is not there.
    interrupted = getattr(result, "interrupted", False)
    drained = getattr(result, "drain_started", False)
    when = "during the drain" if drained else "before the drain"
    if result.not_terminal:
        shown = ", ".join(result.not_terminal[:5])
        where = f"not terminal when the run was interrupted {when}" if interrupted else "NOT TERMINAL after the drain"
        print(f"  {where}: {len(result.not_terminal)} ({shown}"
              f"{', ...' if len(result.not_terminal) > 5 else ''})", file=out)  # fmt: skip
    if interrupted:
        after = f" after {result.drain_seconds:.1f}s" if drained else ""
        print(f"drain: interrupted {when}{after}", file=out)
    else:
        drain = "timed out" if result.drain_timed_out else "complete"
        print(f"drain: {result.drain_seconds:.1f}s, {drain}", file=out)
    kills = ", ".join(f"{aim} {n} (hit {t.kill_hits[aim]})" for aim, n in sorted(t.kills.items())) or "none"
    pauses = ", ".join(f"{k} {n}" for k, n in sorted(t.pauses.items())) or "none"
    c = result.counters
    print(f"faults: kills: {kills}", file=out)
    print(f"        pauses: {pauses}", file=out)
    print(f"        lost replies: {c.get('lose_reply', 0)}, slow tasks: {c.get('slow', 0)}", file=out)
    aim = t.aimed
    for kind in AIMED_FAULTS:
        if aim.hits[kind] or aim.missed[kind]:
            reasons = "; ".join(f"{r} ({n})" for (k, r), n in sorted(aim.reasons.items()) if k == kind)
            print(f"        {kind}: window hit {aim.hits[kind]}, missed {aim.missed[kind]}"
                  f"{f' ({reasons})' if reasons else ''}", file=out)  # fmt: skip
    if cfg.clock_skew_max > 0 or cfg.clock_jump_rate > 0:
        print(f"        clocks: every incarnation off by up to {cfg.clock_skew_max:g} s; {t.clock_jumps} jumps of up "
              f"to {cfg.clock_jump_max:g} s posted", file=out)  # fmt: skip
    if t.hunts_expired:
        expired = ", ".join(f"{k} {n}" for k, n in sorted(t.hunts_expired.items()))
        print(f"        found no target in time: {expired}", file=out)
    for kind in sorted(aim.skipped):
        print(f"        {kind}: not tried, the queue does not offer what it needs (extend())", file=out)
    for kind in () if interrupted else NEMESIS_FAULTS + ("lose_reply", "slow"):
        if cfg.faults.get(kind, 0) > 0 and _injected(kind, t, c) == 0 and not aim.skipped[kind]:
            print(f"  warning: {kind} was requested but never injected", file=out)
    if cfg.probe_rate > 0:
        print(f"probes: {getattr(result, 'probes', 0)} snapshots read mid-run ({cfg.probe_rate:g}/s), judged against "
              "the history by state_matches_history", file=out)  # fmt: skip
    ledger = ledger_counts(result.run_dir)
    if ledger:
        print(f"ledger: {ledger['requests']} action requests, {ledger['performed']} performed, "
              f"{ledger['lost']} replies lost; {ledger['dup_tasks']} tasks with duplicate side effects "
              f"({ledger['extra']} extra actions)", file=out)  # fmt: skip
    if result.crashes or result.service_restarts:
        print(f"harness: {result.crashes} worker exits not caused by the nemesis, "
              f"{result.service_restarts} service restarts", file=out)  # fmt: skip


def _injected(kind: str, t: Any, c: dict[str, int]) -> int:
    from takeover.config import KILL_AIMS

    if kind in KILL_AIMS:
        return t.kills[KILL_AIMS[kind]]
    if kind == "pause":
        return sum(t.pauses.values())
    if kind in AIMED_FAULTS:
        return int(t.aimed.hits[kind] + t.aimed.missed[kind])
    return c.get(kind, 0)
