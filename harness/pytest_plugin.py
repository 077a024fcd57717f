"""The pytest plugin: test your own queue from your own test suite with the ``takeover`` fixture.

Installed with takeover (the ``pytest11`` entry point ``takeover``; ``-p no:takeover`` turns it off)::

    def test_my_queue_keeps_its_promises(takeover):
        takeover.scenarios("myq:MyQueue")                   # the spec's five scenarios
        takeover.stress("myq:MyQueue", profile="smoke")     # real workers under real faults, checked
        takeover.explore("myq:MyQueue", seconds=10)         # random call sequences judged by the spec

Each call fails the test when the queue breaks a promise (pass ``expect_ok=False`` to get the result
instead), with the verdict lines, the plain-words diagnosis when the checker gave one, the line that
reproduces the run and its folder. Why a fixture that asserts rather than returns: the test stays a few
lines long, and the message is the same everywhere.

Why the options: the same test should run short on every pull request and long at night.
``--takeover-duration SECONDS`` sets the faulted phase of every ``takeover.stress`` call that does not
set its own, and ``--takeover-seeds N`` runs each test that uses the fixture once per seed 1..N (as
``test_x[seed1]``, ...), each seed the default ``seed=`` of its calls.

Run folders go under the test's ``tmp_path`` (``takeover/stress-1``, ...); a test that passes removes
them, one that fails keeps them (pytest keeps the last few ``--basetemp`` folders; pass ``--basetemp
DIR`` to put them where CI uploads artifacts from). Every test that uses the fixture gets the marker
``takeover`` (``-m "not takeover"`` leaves them out), and each call adds its verdict to the test's JUnit
properties (``takeover.stress.verdict``, ``.exit_code``, ``.violations``, ``.reproduce``,
``.run_dir``; ``takeover.scenarios.verdict`` and ``.departures``; ``takeover.explore.verdict``,
``.examples``, ``.invariants`` and ``.scenario_file``). ``takeover.explore`` writes a departure's
scenario and pytest files under ``tmp_path`` (``takeover/explore-1``), kept when the test fails.

This module is imported by every pytest session in an environment where takeover is installed, so it
imports nothing of takeover until a test asks for the fixture.
"""

from __future__ import annotations

import shutil
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from takeover.api import ExploreResult, QueueLike, RunResult, ScenarioResult

MARKER = "takeover"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("takeover", "takeover: stress tests of lease-based task queues")
    group.addoption("--takeover-duration", type=float, default=None, metavar="SECONDS",
                    help="seconds of faults of every takeover.stress() call that does not set its own duration "
                         "(default: the profile's)")
    group.addoption("--takeover-seeds", type=int, default=1, metavar="N",
                    help="run each test that uses the takeover fixture once per seed 1..N (default 1)")
    group.addoption("--takeover-db", default=None, metavar="DB",
                    help="the database of every takeover.stress() and takeover.scenarios() call that does not set "
                         "its own db: sqlite, postgres or redis (a private server), or a postgresql:// or redis:// URL "
                         "(default: sqlite)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}: runs takeover against a queue (set on every test that uses the "
                                       "takeover fixture); deselect with -m 'not takeover'")
    seeds = config.getoption("takeover_seeds", 1)
    if seeds is not None and seeds < 1:
        raise pytest.UsageError(f"--takeover-seeds must be a positive integer, got {seeds}")
    duration = config.getoption("takeover_duration", None)
    if duration is not None and not duration > 0:
        raise pytest.UsageError(f"--takeover-duration must be a positive number of seconds, got {duration}")
    database = config.getoption("takeover_db", None)
    if database is not None:
        from takeover._internal import db
        from takeover.errors import UsageError

        try:
            db.check(database)
        except UsageError as exc:
            raise pytest.UsageError(f"--takeover-db: {exc}") from None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    seeds = metafunc.config.getoption("takeover_seeds", 1) or 1
    if "takeover" in metafunc.fixturenames and seeds > 1:
        metafunc.parametrize("takeover", list(range(1, seeds + 1)), indirect=True,
                             ids=[f"seed{s}" for s in range(1, seeds + 1)])


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "takeover" in getattr(item, "fixturenames", ()):
            item.add_marker(MARKER)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    """Keep each phase's report on the item: the fixture's teardown keeps a failed test's run folders."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"_takeover_{report.when}", report)


class Takeover:
    """The ``takeover`` fixture: :func:`takeover.stress`, :func:`takeover.check` and
    :func:`takeover.scenarios`, with run folders under the test's ``tmp_path``, the command-line options'
    defaults, and a failed test's message when a run fails."""

    def __init__(self, node: pytest.Item, folder: Path, duration: float | None, seed: int | None,
                 db: str | None = None) -> None:
        self.node = node
        self.folder = folder
        self.duration = duration
        self.seed = seed
        self.db = db
        self.run_dirs: list[Path] = []

    def _next(self, kind: str) -> Path:
        self.folder.mkdir(parents=True, exist_ok=True)
        n = 1
        while (self.folder / f"{kind}-{n}").exists():
            n += 1
        return self.folder / f"{kind}-{n}"

    def _record(self, kind: str, result: RunResult) -> None:
        props = self.node.user_properties
        props.append((f"takeover.{kind}.verdict", result.verdict))
        props.append((f"takeover.{kind}.exit_code", str(result.exit_code)))
        props.append((f"takeover.{kind}.violations",
                      ", ".join(f"{name} {n}" for name, n in result.violations.items()) or "none"))
        props.append((f"takeover.{kind}.reproduce", result.command))
        props.append((f"takeover.{kind}.run_dir", str(result.run_dir)))
        # The model coverage stays in the JUnit file: a passing test's run folder is removed.
        cov = result.coverage
        if cov is not None:
            props.append((f"takeover.{kind}.coverage", f"{cov['reached']}/{cov['possible']} cells reached"))
            props.append((f"takeover.{kind}.coverage.cells", ", ".join(f"{k} {n}" for k, n in cov["cells"].items())))
            props.append((f"takeover.{kind}.coverage.unreached_important", ", ".join(cov["unreached_important"])))

    def stress(self, queue: QueueLike, *, expect_ok: bool = True, **options: Any) -> RunResult:
        """:func:`takeover.stress` into a folder under ``tmp_path``; ``duration`` and ``seed`` default to
        ``--takeover-duration`` and this test's seed. Fails the test when the run does not pass, unless
        ``expect_ok`` is False."""
        __tracebackhide__ = True
        from takeover.api import stress

        if self.duration is not None:
            options.setdefault("duration", self.duration)
        if self.seed is not None:
            options.setdefault("seed", self.seed)
        if self.db is not None:
            options.setdefault("db", self.db)
        if options.get("out") is None:
            options["out"] = self._next("stress")
        self.run_dirs.append(Path(options["out"]))
        result = stress(queue, **options)
        self._record("stress", result)
        if expect_ok and not result.ok:
            raise AssertionError(f"takeover stress failed (exit {result.exit_code}):\n{result.message()}")
        return result

    def check(self, run_dir: str | Path, *, expect_ok: bool = True, **options: Any) -> RunResult:
        """:func:`takeover.check` on a stored run; fails the test when the run does not pass, unless
        ``expect_ok`` is False."""
        __tracebackhide__ = True
        from takeover.api import check

        result = check(run_dir, **options)
        self._record("check", result)
        if expect_ok and not result.ok:
            raise AssertionError(f"takeover check failed (exit {result.exit_code}):\n{result.message()}")
        return result

    def scenarios(self, queue: QueueLike | None = None, file: str | Path | None = None, *, expect_ok: bool = True,
                  **options: Any) -> ScenarioResult:
        """:func:`takeover.scenarios`; fails the test when a step departs from the spec (or the file),
        unless ``expect_ok`` is False."""
        __tracebackhide__ = True
        from takeover.api import scenarios

        if self.db is not None:
            options.setdefault("db", self.db)
        result = scenarios(queue, file, **options)
        props = self.node.user_properties
        props.append(("takeover.scenarios.verdict", "ok" if result.ok else "FAIL"))
        props.append(("takeover.scenarios.departures", ", ".join(s.id for s in result.scenarios if not s.ok)
                      or "none"))
        if expect_ok and not result.ok:
            raise AssertionError(f"takeover scenarios failed:\n{result.message()}")
        return result

    def explore(self, queue: QueueLike | None = None, *, expect_ok: bool = True, **options: Any) -> ExploreResult:
        """:func:`takeover.explore`; ``seed`` defaults to this test's seed, a departure's files go under
        ``tmp_path``. Fails the test with the shrunk sequence in words when the queue departs from the
        spec, unless ``expect_ok`` is False."""
        __tracebackhide__ = True
        from takeover.api import explore

        if self.seed is not None:
            options.setdefault("seed", self.seed)
        if self.db is not None:
            options.setdefault("db", self.db)
        if options.get("out") is None:
            options["out"] = self._next("explore")
        self.run_dirs.append(Path(options["out"]))
        result = explore(queue, **options)
        props = self.node.user_properties
        props.append(("takeover.explore.verdict", "ok" if result.ok else "FAIL"))
        props.append(("takeover.explore.examples", str(result.examples)))
        props.append(("takeover.explore.invariants", ", ".join(result.failure.invariants) if result.failure
                      else "none"))
        props.append(("takeover.explore.scenario_file", str(result.scenario_file or "")))
        if expect_ok and not result.ok:
            raise AssertionError(f"takeover explore failed (seed {result.seed}):\n{result.message()}")
        return result

    def discard(self) -> None:
        """Remove the run folders of a test that passed: only a failure's evidence is worth the disk."""
        for run_dir in self.run_dirs:
            shutil.rmtree(run_dir, ignore_errors=True)


@pytest.fixture
def takeover(request: pytest.FixtureRequest, tmp_path: Path) -> Generator[Takeover, None, None]:
    """Run takeover against a queue from a test: ``takeover.stress(queue, **options)``,
    ``takeover.check(run_dir)``, ``takeover.scenarios(queue, file=None)``,
    ``takeover.explore(queue, seconds=...)``; each fails the test with a
    readable message when the queue breaks a promise."""
    seed = getattr(request, "param", None)
    fixture = Takeover(request.node, tmp_path / "takeover", request.config.getoption("takeover_duration", None),
                       seed, request.config.getoption("takeover_db", None))  # fmt: skip
    yield fixture
    reports = [getattr(request.node, f"_takeover_{when}", None) for when in ("setup", "call")]
    if all(r is not None and r.passed for r in reports):
        fixture.discard()
