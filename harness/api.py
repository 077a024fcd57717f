"""The Python API: ``takeover.stress``, ``takeover.check`` and ``takeover.scenarios``, for tests and scripts.

Why an API beside the command line: a user tests their own queue in their own repository, from their
own test suite, and wants a result to assert on rather than a process to parse. Each function runs the
library code the command line runs, so a test and ``takeover ...`` in a shell give the same verdict:

- :func:`stress` runs the library's stress run (:func:`takeover._internal.stress_run.run_stress`, what ``takeover
  stress`` runs) by way of :mod:`takeover._internal.stress_child`: its checks in this process
  (:func:`~takeover._internal.stress_run.checked`), each once, then the run in a child process, which hands back
  the RunResult it built in memory. The child is for interrupt
  safety, not the way to the core: a run installs signal handlers,
  spawns worker processes that import the queue by name, and must be reaped whatever happens to its
  caller: in a session of its own the run is out of reach of the caller's terminal; when the caller
  is interrupted (Ctrl-C, or pytest-timeout's exception) the run gets a terminal's Ctrl-C (the clean
  stop: faults end, paused workers resume, the history is closed), then SIGKILL for whatever is left
  after a grace period; and should the caller die outright (pytest-timeout's thread method ends the
  process), the kernel kills the run (``PR_SET_PDEATHSIG``, :mod:`takeover._internal.lifeline`), whose own
  workers die with it.
- :func:`check` is ``takeover check``'s pipeline, in this process (it starts no process).
- :func:`scenarios` replays the scenarios in this process, as ``takeover scenarios`` does, with the
  same per-call deadline for a queue that hangs.

The options of :func:`stress` are the command's options under their Python names (``--task-time-mean``
is ``task_time_mean=``); which names exist, their defaults, and how each value is read and checked come
from the definitions the command's parser is built from (:data:`takeover._internal.options.STRESS_OPTIONS`), with
no parser in between. Bad input raises :class:`takeover.errors.UsageError` with the command's one-line
message.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from takeover.errors import UsageError
from takeover.run_result import RunResult

if TYPE_CHECKING:
    from takeover._internal.config import RunConfig
    from takeover._internal.explorer.core import ExploreResult
    from takeover._internal.options import RunOption
    from takeover._internal.scenario.results import ReplayedScenario

# A queue as the API takes it: "MODULE:ATTR", or the class or factory function itself.
QueueLike = str | type | Callable[[str], Any]



# -- results -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ScenarioResult:
    """What replaying the scenarios concluded (every scenario of the spec, or of a file).

    ``ok`` when every step matches; ``exit_code`` is the command's (0 or 1). ``scenarios`` holds each
    scenario's own result (``takeover._internal.scenario.results.ReplayedScenario``: its steps, what each returned);
    ``failures`` one plain line per departure; ``transcript`` what ``takeover scenarios`` prints;
    ``json`` what ``takeover scenarios --json`` prints.
    """

    ok: bool
    exit_code: int
    queue: str
    scenarios: list[ReplayedScenario]
    failures: list[str]
    transcript: str
    json: dict[str, Any] = field(repr=False)

    def message(self) -> str:
        """What a failing test says: each departure from the scenarios, and how to see them all."""
        ids = ", ".join(s.id for s in self.scenarios if not s.ok)
        return "\n".join([f"scenarios that depart from the spec on {self.queue}: {ids}", *self.failures,
                          f"see every step with: takeover scenarios --queue {self.queue}"])


# -- the queue, by name --------------------------------------------------------------------------------------
def queue_name(queue: QueueLike) -> str:
    """``queue`` as ``MODULE:ATTR``. A class or factory must be importable by that name: every worker
    process imports the queue again. A one-line :class:`UsageError` says why one is not (defined inside a
    function, nested in a class, defined in the script being run, or imported under another name)."""
    if isinstance(queue, str):
        return queue
    module, qualname = getattr(queue, "__module__", None), getattr(queue, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str):
        raise UsageError(f"queue must be 'MODULE:ATTR', a class or a factory function, got {queue!r}")
    where = f"{module}.{qualname}"
    if "<locals>" in qualname or "<lambda>" in qualname:
        raise UsageError(f"queue {where} is defined inside a function, so worker processes cannot import it by "
                         f"name: define it at the top level of a module")
    if "." in qualname:
        raise UsageError(f"queue {where} is nested in a class, so it cannot be named MODULE:ATTR: define it at "
                         f"the top level of a module")
    if module == "__main__":
        raise UsageError(f"queue {qualname} is defined in the script being run (__main__), which worker processes "
                         f"cannot import: move it into a module and import it from there")
    try:
        found = getattr(importlib.import_module(module), qualname, None)
    except Exception:  # noqa: BLE001 - any failure means the same: not importable by name
        found = None
    if found is not queue:
        raise UsageError(f"queue {where} cannot be imported by that name (is it imported under another name?): "
                         f"pass it as 'MODULE:ATTR'")
    return f"{module}:{qualname}"


# -- stress --------------------------------------------------------------------------------------------------
def _keywords() -> tuple[RunOption, ...]:
    """The options :func:`stress` takes as keywords: every ``takeover stress`` option but its queue."""
    from takeover._internal.options import STRESS_OPTIONS

    return tuple(o for o in STRESS_OPTIONS if o.dest != "queue")


def stress_options() -> dict[str, str]:
    """Every keyword :func:`stress` takes, with its command-line flag: the ``takeover stress`` options
    (``queue`` is the positional argument)."""
    return {o.dest: o.flag for o in _keywords()}


def stress_values(queue: QueueLike, **options: Any) -> argparse.Namespace:
    """The keywords of :func:`stress` as the ``takeover stress`` parser gives its options: every option, by
    its dest, read and defaulted from the same definitions (takeover._internal.options.STRESS_OPTIONS), so a value
    is read, refused and defaulted in the same words. Raises a one-line UsageError."""
    from takeover._internal.options import from_keywords

    values = from_keywords(options, _keywords(), "takeover.stress()")
    return argparse.Namespace(queue=queue_name(queue), **values)


def stress_config(queue: QueueLike, **options: Any) -> RunConfig:
    """The validated config :func:`stress` runs (what ``takeover stress`` resolves from the same options)."""
    from takeover._internal.stress_run import resolve

    return resolve(stress_values(queue, **options))


def stress(queue: QueueLike, **options: Any) -> RunResult:
    """Run ``takeover stress`` against ``queue`` with real worker processes and real faults; check it.

    ``options`` are the command's options under their Python names: ``profile``, ``workers``, ``tasks``,
    ``duration``, ``lease``, ``seed``, ``swarm``, ``out``, ``remedy``, ``heartbeat``, the task-time and
    fault-rate options (``kill_rate``, ``pause_rate``, ...), ``no_faults``, ``reconcile``,
    ``fail_on_duplicates``, ``max_duplicates_per_1000`` (:func:`stress_options` lists them all).
    ``out`` is the run folder (default ``runs/<timestamp>``, as the command's). The run's output goes
    to this process's stdout and stderr as it happens.

    Returns the checked run; raises :class:`UsageError` on bad input (nothing is started) and re-raises
    an interrupt or a test timeout once every process of the run is gone.
    """
    from takeover._internal.stress_child import stress_in_child

    args = stress_values(queue, **options)  # read as the command reads its options
    return stress_in_child(args)  # checked here once, run in a child (takeover._internal.stress_child)


# -- check ---------------------------------------------------------------------------------------------------
def check(run_dir: str | os.PathLike[str], *, fail_on_duplicates: bool = False,
          max_duplicates_per_1000: float | None = None, reports: bool = True) -> RunResult:
    """Re-check a stored run folder, as ``takeover check RUN_DIR`` does: write summary.json (and, with
    ``reports``, report.md, report.html and junit.xml) into it and return the verdict. The two
    duplicate options are the command's gate. Raises :class:`UsageError` for a folder that is not a run."""
    from takeover._internal.pipeline import check_and_report

    buf = io.StringIO()
    result = check_and_report(Path(run_dir), fail_on_duplicates=fail_on_duplicates,
                              max_duplicates_per_1000=max_duplicates_per_1000, reports=reports, out=buf)
    return RunResult.of(Path(run_dir), int(result.exit_code), result.summary, output=buf.getvalue())


# -- scenarios -----------------------------------------------------------------------------------------------
def scenarios(queue: QueueLike | None = None, file: str | os.PathLike[str] | None = None, *,
              only: list[str] | None = None, step_timeout: float | None = None, lang: str = "en",
              db: str = "sqlite") -> ScenarioResult:
    """Replay the spec's five scenarios (or those of ``file``, in the format of the spec's scenarios.json,
    as ``takeover scenarios --file`` runs them) against ``queue`` and compare every step.

    ``queue`` defaults to the queue the file names, else the reference queue (of ``db``'s kind). ``only``
    picks scenarios by id; ``step_timeout`` is each queue call's deadline (the command's default when None);
    ``db`` is ``--db``: each scenario's fresh database (takeover._internal.db). Raises
    :class:`UsageError` for a queue that cannot be loaded and a malformed file.
    """
    from takeover._internal import db as databases
    from takeover._internal.scenario.engine import DEFAULT_STEP_TIMEOUT, LANGS
    from takeover._internal.scenario.file import load_scenario_file
    from takeover._internal.scenario.replay import results_to_json, run_scenarios
    from takeover.contract import reference_queue
    from takeover.reports.transcript import print_transcript

    if lang not in LANGS:
        raise UsageError(f"lang must be one of {', '.join(LANGS)}, got {lang!r}")
    timeout = DEFAULT_STEP_TIMEOUT if step_timeout is None else step_timeout
    doc = load_scenario_file(os.fspath(file)) if file is not None else None
    spec = queue_name(queue) if queue is not None else (doc or {}).get("queue") or reference_queue(db)
    with databases.serve(db):
        results = run_scenarios(spec, only, timeout, doc=doc)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        print_transcript(results, spec, lang, timeout, doc=doc)
    ok = all(r.ok for r in results)
    return ScenarioResult(ok=ok, exit_code=0 if ok else 1, queue=spec, scenarios=results,
                          failures=[line for r in results for line in r.failures()], transcript=buf.getvalue(),
                          json=results_to_json(results, spec, timeout, doc=doc))


# -- explore ---------------------------------------------------------------------------------------------------
def explore(queue: QueueLike | None = None, *, seed: int = 1, examples: int | None = None,
            seconds: float | None = None, steps: int | None = None, step_timeout: float | None = None,
            db: str = "sqlite", out: str | os.PathLike[str] | None = None) -> ExploreResult:
    """Try random sequences of queue calls in this process, each answer judged by the spec's model, as
    ``takeover explore`` does; a departure is shrunk to a minimal sequence (``result.failure``, in words
    by ``result.message()``) and, when ``out`` is given, written there as a scenario file and a pytest
    file (``result.scenario_file``, ``result.test_file``).

    ``queue`` defaults to the reference queue of ``db``'s kind; the budget is ``examples`` (200 when
    neither is given) or ``seconds``; ``seed`` makes it repeatable. ``result.ok`` is False when the
    queue departed (``exit_code`` 1). Raises :class:`UsageError` for bad input.
    """
    from takeover._internal import db as databases
    from takeover._internal.explorer.core import DEFAULT_STEPS, explore_queue
    from takeover._internal.scenario.engine import DEFAULT_STEP_TIMEOUT
    from takeover.contract import reference_queue

    if examples is not None and seconds is not None:
        raise UsageError("give examples or seconds, not both")
    spec = queue_name(queue) if queue is not None else reference_queue(db)
    with databases.serve(db):
        return explore_queue(spec, seed=seed, examples=examples, seconds=seconds,
                             steps=DEFAULT_STEPS if steps is None else steps,
                             step_timeout=DEFAULT_STEP_TIMEOUT if step_timeout is None else step_timeout,
                             out=None if out is None else Path(out))
