"""``explore_queue``: run the state machine on a queue within a budget, and make a departure a
scenario file.

Why Hypothesis's own engine rather than a loop of random steps: it generates, shrinks (fewer steps,
then smaller choices: one task, fewer actors, the same instant rather than a later one) and replays
the minimal example last, which is the one recorded here. Every choice comes from ``seed``
(Hypothesis's ``seed``, no example database unless a folder is named for one), so the same seed and
example budget give the same shrunk sequence; a budget in seconds stops between examples (never in
the middle of shrinking a departure already found).

Why the departure is written through ``takeover replay``'s machinery: the steps of the departing
task (plus the claims and reopens around them) are one task's scenario; rerun by
:class:`~takeover._internal.replay.judge.Replayer` (the scenario engine, as ``takeover scenarios --file``
runs it) they must depart again, are put on whole numbers by the replay's shrinker, and are written
by :mod:`takeover._internal.replay.output` exactly as a replay writes them: expectations from the spec's model,
a pytest file beside the scenario file. A departure no one task's steps show is written as one scenario of
the tasks it needs (:mod:`takeover._internal.explorer.tasks`).
"""

from __future__ import annotations

import contextlib
import math
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.errors import Flaky
from hypothesis.stateful import get_state_machine_test

from takeover._internal import db
from takeover._internal.explorer.calls import Failure, Recorder, Setup, Step
from takeover._internal.explorer.machine import machine_class
from takeover._internal.explorer.tasks import write_tasks
from takeover._internal.explorer.words import ExploreResult, Written, write_outputs
from takeover._internal.replay.judge import Outcome, Replayer, ReplayHung
from takeover._internal.replay.shrink import drop_default_lease, shrink
from takeover._internal.scenario.engine import DEFAULT_STEP_TIMEOUT, StepHung, check_step_timeout, live_queue
from takeover._internal.scenario.overlap import statement_counts
from takeover._internal.scratch import scratch_dir
from takeover.contract import has_extension, load_queue_factory
from takeover.errors import UsageError

DEFAULT_EXAMPLES = 200
DEFAULT_LEASE = 1.0
SHRINK_EXAMPLES = 100  # examples Hypothesis may run to shrink a departure; the replay's shrinker finishes it
BATCH = 25  # examples per Hypothesis run under a budget in seconds
DEFAULT_STEPS = 20  # steps per example at most (Hypothesis's stateful_step_count)
EXPLORE_DB = "hypothesis-db"  # the example database's folder inside the output folder, when one is kept


def explore_queue(queue_spec: str, *, seed: int = 1, examples: int | None = None, seconds: float | None = None,
                  steps: int = DEFAULT_STEPS, lease: float = DEFAULT_LEASE,
                  step_timeout: float = DEFAULT_STEP_TIMEOUT, out: Path | None = None,
                  example_db: bool = False, shrink_budget: int = SHRINK_EXAMPLES,
                  overlaps: bool = True) -> ExploreResult:
    """Explore ``queue_spec`` (``MODULE:ATTR``) on the database being served (takeover._internal.db), and
    write a departure's scenario and pytest file into ``out`` (when given). Bad input is a
    :class:`UsageError` (one line). ``overlaps``: also steps of two calls at once (explore.overlap)."""
    check_budget(seed, examples, seconds, steps)
    step_timeout = check_step_timeout(step_timeout)
    factory = load_queue_factory(queue_spec)
    db.check_queue_takes(queue_spec, factory, _probe_database())
    if examples is None and seconds is None:
        examples = DEFAULT_EXAMPLES
    recorder = Recorder(seconds=seconds, shrink_budget=shrink_budget)
    database = None
    if example_db:
        if out is None:
            raise UsageError("an example database is kept in the output folder: name one (--out)")
        database = DirectoryBasedExampleDatabase(str(out / EXPLORE_DB))
    start = time.monotonic()
    # One database for every example and replay (emptied before each) on PostgreSQL: see db.reused.
    with scratch_dir("takeover-explore-") as folder, db.reused(Path(folder), "explore"):
        try:
            statements = _check_opens(queue_spec, factory, lease, step_timeout) if overlaps else {}
        except StepHung as hung:  # a queue that does not answer is no bad input: say so, exit 3
            return ExploreResult(queue_spec, seed, 0, 0, time.monotonic() - start, db.current().value,
                                 hung=f"the queue does not answer: {hung}")
        setup = Setup(queue_spec, factory, lease, step_timeout, recorder, statements)
        try:
            with _no_local_constants():
                _run_batches(setup, examples, seconds, steps, seed, database)
        finally:
            recorder.close_open()
        result = ExploreResult(queue_spec, seed, recorder.examples, recorder.steps, time.monotonic() - start,
                               db.current().value, recorder.failure, first=recorder.first_failure,
                               cells=recorder.coverage.to_json(), shrink_examples=recorder.shrink_examples,
                               flaky_batches=recorder.flaky_batches)
        if result.failure is not None:
            result.written = write_back(queue_spec, factory, lease, step_timeout, result.failure)
    if result.failure is not None and result.written is not None:
        if out is not None and result.written.shrunk is not None:
            result.scenario_file, result.test_file = write_outputs(result, out)
    return result


def raised_in_an_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` was raised while a Ctrl-C was being handled (a KeyboardInterrupt in its chain).

    Why: SIGTERM and SIGHUP become a KeyboardInterrupt wherever the main thread is (takeover.cli). Landing
    inside Hypothesis's own bookkeeping (computing the database key, before its runner exists), the interrupt
    makes Hypothesis's handler fail an internal assertion, and an AssertionError with a traceback came out
    instead of "takeover: interrupted" (exit 1, not 130). Such an error is the interrupt, told as one."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        if isinstance(link, KeyboardInterrupt):
            return True
        seen.add(id(link))
        link = link.__cause__ or link.__context__
    return False


def _run_batches(setup: Setup, examples: int | None, seconds: float | None, steps: int, seed: int,
                 database: DirectoryBasedExampleDatabase | None) -> None:
    recorder = setup.recorder
    batch = 0
    while recorder.failure is None:
        # Batches of examples, each a Hypothesis run seeded from ``seed`` and its number: the lean
        # toward unreached cells changes between batches only (explore.coverage), and a budget in
        # seconds is checked between them (Hypothesis itself stops only after a number of examples).
        size = BATCH if examples is None else min(BATCH, examples - batch * BATCH)
        if size <= 0:
            break
        recorder.coverage.new_batch()
        config = settings(
            max_examples=size,
            stateful_step_count=steps,
            deadline=None,
            database=database,
            derandomize=False,
            suppress_health_check=list(HealthCheck),
            report_multiple_bugs=False,
            phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink),
            verbosity=Verbosity.quiet,
            print_blob=False,
        )
        batch_seed = seed if batch == 0 else seed * 1_000_003 + batch
        test = hypothesis_seed(batch_seed)(get_state_machine_test(machine_class(setup), settings=config))
        try:
            test()
        except Exception as exc:  # noqa: BLE001 - a departure (or Hypothesis saying a replay differed): judged below
            if raised_in_an_interrupt(exc):
                raise KeyboardInterrupt("interrupted inside Hypothesis") from None
            if isinstance(exc, Flaky):
                # Two calls at once may take effect in either order, and a correct queue may answer either
                # way (explore.overlap): the same draws then meet another model, and Hypothesis, which wants
                # a test to draw alike on the same choices, stops the batch. Not a departure: the next batch
                # goes on.
                if recorder.failure is None:
                    recorder.flaky_batches += 1
            elif recorder.failure is None:
                raise
        batch += 1
        if recorder.spent():
            break


@contextlib.contextmanager
def _no_local_constants() -> Iterator[None]:
    """Hypothesis draws, now and then, a constant it found in the source of the modules loaded so far
    (its "local constants"); which modules are loaded differs between the command line, the API and the
    pytest plugin (and an editable install from an installed one), so the same seed would find different
    sequences. Here it finds none: the same seed gives the same examples from every entry point. (A
    private hook of Hypothesis, left alone when a version has no such thing.)"""
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:  # pragma: no cover - a Hypothesis without the module
        yield
        return
    original = getattr(providers, "_get_local_constants", None)
    cache = getattr(providers, "CONSTANTS_CACHE", None)
    empty = getattr(providers, "Constants", None)
    if original is None or empty is None:
        yield
        return
    none = empty()
    providers._get_local_constants = lambda: none
    if cache is not None:
        cache.cache.clear()
    try:
        yield
    finally:
        providers._get_local_constants = original
        if cache is not None:
            cache.cache.clear()


def _check_opens(queue_spec: str, factory: Any, lease: float, step_timeout: float) -> dict[str, int]:
    """Open the queue once before any example: one that cannot be built is bad input (ContractError,
    one line, exit 2), not a departure for Hypothesis to shrink. Then count the statements each of its
    calls issues (where an overlap can pause it: :func:`takeover._internal.scenario.overlap.statement_counts`). A call
    that does not return (the opening included) raises :class:`StepHung`: the queue does not answer."""
    with live_queue("explore-open", queue_spec, factory, lease, step_timeout) as live:
        live.open()
        can = tuple(e for e in ("extend", "resolve") if has_extension(live.queue, e))
        return statement_counts(live, can)


def check_budget(seed: Any, examples: Any, seconds: Any, steps: Any) -> None:
    def whole(name: str, value: Any, low: int) -> None:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
            raise UsageError(f"{name} must be a whole number of {low} or more, got {value!r}")

    whole("--seed", seed, 0)
    whole("--examples", examples, 1)
    whole("--steps", steps, 1)
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int | float)
                                or not math.isfinite(seconds) or seconds <= 0):
        raise UsageError(f"--seconds must be a positive number of seconds, got {seconds!r}")


def _probe_database() -> str:
    """A database string of the served kind, for the check that the queue takes it."""
    return {db.SQLITE: "queue.sqlite", db.REDIS: "redis://probe:6379/0"}.get(db.current().kind, "postgresql://probe")


def candidate_tasks(failure: Failure) -> list[str]:
    """The tasks the departure may be about, likeliest first: those its words name (the snapshot's task,
    the task a claim should have handed out), the task its step acted on, then every task of the example
    from the latest step back. A claim that answered None acts on no task: the one it passed over is named
    in what the spec says, not in the last step that named a task."""
    last = failure.steps[-1]
    named = re.findall(r"\btask (t\d+)", " ".join((last.what, last.expected, last.answered)))
    seen = [*named, *([last.task] if last.task else []), *(s.task for s in reversed(failure.steps) if s.task)]
    return list(dict.fromkeys(seen)) or ["t1"]


def project(failure: Failure, task: str) -> list[dict[str, Any]]:
    """The departing step and ``task``'s steps as one task's scenario: the steps on it, the claims that got
    it or nothing, and the reopens; the task as the scenario's task (no step names one)."""
    last = failure.steps[-1]
    keep = [s.spec["step"] == "exit_and_reopen" or s.task == task or s is last
            or (s.spec["step"] == "claim" and s.task is None) for s in failure.steps]
    for i, s in enumerate(failure.steps):  # two calls at once stay together (takeover._internal.scenario.overlap)
        if "pause_before_statement" in s.spec and any(keep[i:i + 3]):
            keep[i:i + 3] = [True] * len(keep[i:i + 3])
    return [{k: v for k, v in s.spec.items() if k != "task"} for s, kept in zip(failure.steps, keep,
                                                                                strict=True) if kept]


def write_back(queue_spec: str, factory: Any, lease: float, step_timeout: float, failure: Failure) -> Written:
    """Replay each candidate task's steps alone through the scenario engine (:func:`candidate_tasks`): the
    first whose steps break the same invariant again is the departure's task; the replay's shrinker then
    puts its steps on whole numbers. When none does, every task's steps together (:func:`write_tasks`)."""
    replayer = Replayer(queue_spec, factory, step_timeout)
    tried: list[str] = []
    for task in candidate_tasks(failure):
        steps = drop_default_lease(project(failure, task), lease)
        try:
            outcome: Outcome = replayer.run(task, lease, steps)
        except ReplayHung as exc:
            return Written(task, None, f"the queue hung when task {task}'s steps were replayed alone: {exc}")
        wanted = next((inv for inv in failure.invariants if outcome.breaks(inv)), None)
        if wanted is None:
            tried.append(f"{task}: {', '.join(sorted(outcome.invariants())) or 'nothing'}")
            continue
        try:
            return Written(task, shrink(replayer, task, lease, steps, wanted))
        except ReplayHung as exc:
            return Written(task, None, f"the queue hung while the scenario was shrunk: {exc}")
    alone = (f"no one task's steps alone break {', '.join(failure.invariants)} (each task's alone breaks: "
             f"{'; '.join(tried)})")
    try:
        got = write_tasks(queue_spec, factory, lease, step_timeout, failure)
    except ReplayHung as exc:
        return Written(failure.steps[-1].task or "t1", None, f"{alone}, and the queue hung when they were replayed "
                                                             f"together: {exc}")
    if isinstance(got, str):
        return Written(failure.steps[-1].task or "t1", None, f"{alone}, and {got}")
    shrunk, shown, used = got
    return Written(used[0] if used else "t1", shrunk, tasks=used, shown=shown)


__all__ = ["ExploreResult", "Step", "explore_queue"]
