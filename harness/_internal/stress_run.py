"""One stress run as a library call: the composition root of takeover.

Why one root: ``takeover stress``, the Python API (takeover.api), hunt, soak, sweep, tune and mutate
all start stress runs. Each must resolve its options exactly as ``takeover stress`` does (the run's
reproduce line is then a plain ``takeover stress`` line), refuse a queue that fails the contract before
any folder exists, and hand the runner the same worker. The commands parse arguments and print; the
work is here, where every feature reaches it without importing a command:

- :func:`resolve`: options -> a validated :class:`RunConfig`; :func:`check_queue`: the contract, first;
- :func:`coordinator_for` / :func:`run_once`: the runner (takeover._internal.run) with the workload's worker
  (takeover.workloads), composed here and nowhere else; what hunt, soak, sweep (and so tune) and mutate run;
- :func:`run_stress`: the whole of ``takeover stress``: database served, queue checked (:func:`checked`),
  then folder made, the run, the check and reports (:func:`run_checked`), returned as a
  :class:`~takeover.run_result.RunResult` built in memory.

``resolve`` takes the options by their dest (``task_time_mean``), as an ``argparse.Namespace`` from a
parser built by :func:`takeover._internal.options.add_run_options` or as a plain mapping; an option that is absent
or None keeps the profile's value.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from takeover._internal import db, store, swarm
from takeover._internal.config import RunConfig, load_profile, with_database, with_overrides
from takeover._internal.locate import locate
from takeover._internal.options import DEFAULT_PROFILE, FAULT_RATES, db_given, given
from takeover._internal.scratch import scratch_dir
from takeover.contract import load_queue_factory, open_queue
from takeover.errors import UsageError
from takeover.exit_codes import ExitCode
from takeover.run_result import RunResult

if TYPE_CHECKING:
    from takeover._internal.checker import CheckResult
    from takeover._internal.run.coordinator import Coordinator, RunOutcome
    from takeover._internal.run.progress import Progress


Options = argparse.Namespace | Mapping[str, Any]

def _namespace(options: Options) -> argparse.Namespace:
    if isinstance(options, argparse.Namespace):
        return options
    values = dict(options)
    values.setdefault("profile", DEFAULT_PROFILE)
    return argparse.Namespace(**values)


def resolve(options: Options) -> RunConfig:
    """Profile + options (+ the swarm draw, with ``--swarm``) -> a validated RunConfig. Raises UsageError;
    creates nothing."""
    base, pinned = resolve_base(options)
    return swarm.draw(base, pinned).validate() if base.swarm else base


def resolve_base(options: Options) -> tuple[RunConfig, tuple[str, ...]]:
    """Profile + options, validated, before any swarm draw; and the fault kinds whose rate was given
    explicitly, which a swarm draw keeps as given. The config carries where the queue and the profile
    were found (takeover._internal.locate), so its reproduce line runs again from a fresh shell.

    The soak needs the two apart: each of its segments draws its own mix around the same base.
    """
    args = _namespace(options)
    base = load_profile(args.profile)
    overrides = given(args, "stress")
    no_faults = getattr(args, "no_faults", False)
    if no_faults and overrides.get("swarm"):
        raise UsageError("--swarm draws the fault rates and --no-faults sets them all to 0: give one of them")
    pinned = tuple(o.field.partition(".")[2] for o in FAULT_RATES if overrides[o.dest] is not None)
    # --no-faults zeroes the profile's rates; a rate given explicitly beside it still counts
    # (e.g. `--no-faults --kill-rate 1` is a run with kills only).
    if no_faults:
        for dest in [o.dest for o in FAULT_RATES] + ["clock_skew_max", "clock_jump_rate"]:
            if overrides[dest] is None:
                overrides[dest] = 0.0
    cfg = with_overrides(base, overrides)
    cfg = with_database(cfg, db_given(args), queue_given=overrides["queue"] is not None).validate()
    where = locate(cfg.queue, cfg.profile)
    return dataclasses.replace(cfg, workdir=where.workdir, pythonpath=where.pythonpath), pinned


def check_queue(spec: str) -> None:
    """Open the queue once on a scratch database (of the --db being served): a queue that fails the
    contract, or does not take that kind of database, stops us here."""
    factory = load_queue_factory(spec)
    with scratch_dir("takeover-check-") as tmp, \
            db.current().database(Path(tmp), "check") as database:
        queue = open_queue(spec, database, factory)
        try:
            queue.close()
        except Exception as exc:  # noqa: BLE001
            raise UsageError(f"queue {spec!r}: close() failed: {type(exc).__name__}: {exc}") from None


# -- the runner and its worker, composed --------------------------------------------------------------------
def coordinator_for(cfg: RunConfig, run_dir: Path, *, database: str | None = None,
                    on_progress: Callable[[Progress], None] | None = None) -> Coordinator:
    """The coordinator of one run of ``cfg`` into ``run_dir``, whose workers run takeover's workload.
    (Loaded here, not at the top: a command's ``--help`` must not pay for the runner.)"""
    from takeover._internal.run.coordinator import Coordinator
    from takeover.workloads.worker import worker_main

    return Coordinator(cfg, run_dir, worker=worker_main, on_progress=on_progress, database=database)


def run_once(cfg: RunConfig, run_dir: Path, *, database: str | None = None,
             on_progress: Callable[[Progress], None] | None = None) -> RunOutcome:
    """One run, unchecked: what the run itself saw (its folder holds the rest)."""
    return coordinator_for(cfg, run_dir, database=database, on_progress=on_progress).run()


# -- takeover stress ---------------------------------------------------------------------------------------------
@contextlib.contextmanager
def checked(cfg: RunConfig, *, database: str | None = None, out: str | None = None, keep_db: bool = False,
            reconcile: bool = False) -> Iterator[db.Host]:
    """Everything a stress run of ``cfg`` refuses, each once, before anything starts: the run folder
    (``out``), ``reconcile`` beside a private Redis server, the database (``database``: the ``--db`` value
    as given, ``cfg.db`` when None; served inside, its host yielded) and the queue's contract on it. Raises
    :class:`UsageError`; creates no folder. The API runs this in the caller's process, its child the rest
    (:func:`run_checked`), so the user hears a bad input before any process of the run exists."""
    store.check_out(out)
    if reconcile and cfg.db == db.REDIS:
        raise UsageError("--reconcile with --db redis: the run's tasks are on the run's own server, which is gone "
                         "when the run is; give --db a redis://HOST:PORT/N URL of your own server to reconcile")
    with db.serve(database or cfg.db, keep=keep_db) as host:
        check_queue(cfg.queue)
        yield host


def run_stress(cfg: RunConfig, *, database: str | None = None, out: str | None = None, keep_db: bool = False,
               reconcile: bool = False, fail_on_duplicates: bool = False,
               max_duplicates_per_1000: float | None = None, console: TextIO | None = None,
               progress: TextIO | None = None) -> RunResult:
    """One ``takeover stress`` run of ``cfg`` (from :func:`resolve`), checked, and its result.

    ``database`` is the ``--db`` value as given (``cfg.db`` holds it without a password; its default).
    ``out`` is the run folder (default ``runs/<timestamp>``). ``console`` gets what the command prints
    on stdout (the header, the run's own summary, the verdict), ``progress`` the live progress and the
    notes of an interrupted run (the command's stderr); None prints nothing there. The duplicate
    options are the checker's gate. Raises :class:`UsageError` before anything starts (:func:`checked`); a
    Ctrl-C is the result's exit code 130, once what was recorded is kept (and checked, when the run had ended).
    """
    with checked(cfg, database=database, out=out, keep_db=keep_db, reconcile=reconcile) as host:
        return run_checked(cfg, host, store.create(out), reconcile=reconcile, fail_on_duplicates=fail_on_duplicates,
                           max_duplicates_per_1000=max_duplicates_per_1000, console=console, progress=progress)


def run_checked(cfg: RunConfig, host: db.Host, run_dir: Path, *, reconcile: bool = False,
                fail_on_duplicates: bool = False, max_duplicates_per_1000: float | None = None,
                console: TextIO | None = None, progress: TextIO | None = None) -> RunResult:
    """:func:`run_stress` after :func:`checked` passed: the run into ``run_dir`` (made already) on a fresh
    database of ``host``, checked. Checks nothing again: the API's child runs this, its caller having
    checked everything (and made the folder) in its own process."""
    with host.database(run_dir) as url:
        return _stress(dataclasses.replace(cfg, out=str(run_dir)), run_dir, url, reconcile=reconcile,
                       gate=(fail_on_duplicates, max_duplicates_per_1000), console=console,
                       progress=progress)  # fmt: skip


def _stress(cfg: RunConfig, run_dir: Path, database: str, *, reconcile: bool, gate: tuple[bool, float | None],
            console: TextIO | None, progress: TextIO | None) -> RunResult:
    """The run on its database, then the verdict, while the database still exists (reconcile reads it)."""
    from takeover._internal.run.progress import ProgressDisplay
    from takeover.reports.run_summary import print_run_summary

    out, err = console or io.StringIO(), progress or io.StringIO()  # None: printed nowhere
    print(f"takeover stress: run folder {run_dir}", file=out)
    if cfg.db == db.REDIS:
        print(f"redis persistence: {cfg.redis_persistence} ({db.PERSISTENCE_WORDS[cfg.redis_persistence]})", file=out)
    if cfg.swarm:
        print(f"swarm mix (seed {cfg.seed}): {swarm.describe(cfg)}", file=out)
    print(f"reproduce with: {cfg.command()}", file=out, flush=True)
    with ProgressDisplay(err) as display:
        result = run_once(cfg, run_dir, database=database, on_progress=display.update)
    checked: CheckResult | None = None
    try:
        if reconcile and not result.interrupted:
            from takeover._internal.reconcile import describe, reconcile_run

            out.write(describe(reconcile_run(run_dir, database=database)))
        print_run_summary(result, out)
        code, checked = _check(run_dir, gate, out, err)
        print(f"run folder: {run_dir}", file=out)
        print(f"reproduce with: {cfg.command()}", file=out, flush=True)
    except KeyboardInterrupt:  # the run is complete and kept: only the verdict (or its printing) is missing
        print(f"takeover stress: interrupted after the run; the run is kept, check it with: "
              f"takeover check {run_dir}", file=err)  # fmt: skip
        return RunResult.read(run_dir, ExitCode.INTERRUPTED) if checked is None else \
            RunResult.of(run_dir, ExitCode.INTERRUPTED, checked.summary, command=cfg.command())
    if result.interrupted:
        # The verdict above covers what was recorded; the run itself did not complete.
        print("takeover stress: interrupted; what was recorded is kept and was checked", file=err)
        code = ExitCode.INTERRUPTED
    return RunResult.of(run_dir, int(code), None if checked is None else checked.summary, command=cfg.command())


def _check(run_dir: Path, gate: tuple[bool, float | None], out: TextIO,
           err: TextIO) -> tuple[ExitCode, CheckResult | None]:
    """Hand the run to the checker when it is installed (otherwise the run's own summary is all there is)."""
    try:
        from takeover._internal.pipeline import check_and_report
    except Exception as exc:  # noqa: BLE001 - a broken checker must not hide the run
        if not isinstance(exc, ImportError):
            print(f"takeover stress: the checker failed to import ({type(exc).__name__}: {exc})", file=err)
        print("(takeover._internal.checker is not installed: the run was recorded but not checked)", file=out)
        return ExitCode.VALID, None
    try:
        checked = check_and_report(run_dir, fail_on_duplicates=gate[0], max_duplicates_per_1000=gate[1], out=out,
                                   confirm=True)  # fmt: skip
    except UsageError:
        raise
    except Exception as exc:  # noqa: BLE001 - the run is kept; say why there is no verdict
        print(f"takeover stress: the checker failed on {run_dir}: {type(exc).__name__}: {exc}; "
              f"re-check later with: takeover check {run_dir}", file=err)  # fmt: skip
        return ExitCode.INCONCLUSIVE, None
    return checked.exit_code, checked
