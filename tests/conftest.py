"""What every tier of the suite shares: fixture queues importable by name, Ctrl-C that reaches the
commands the tests start, the skip (a failure in CI) of a test whose system package is missing, and
shared fixtures.

Tests import shared code as ``from tests.helpers.<module> import ...`` (``tests`` is a package, and
pytest's importlib mode imports each test file as part of it). The fixture queues in
tests/fixtures/queues/ are not imported that way: ``takeover`` must find them by plain module name,
as it finds a user's queue, so they go on the path here for commands run in this process, and on
PYTHONPATH (tests/helpers/queues.py) for every subprocess. tests/README.md says where a test goes.
"""

from __future__ import annotations

import functools
import re
import signal
import tempfile
from pathlib import Path

import pytest

from tests.helpers import queues, system_packages

queues.on_path()

# Matplotlib's Agg backend is a C extension that cannot be imported twice in one process. A test that
# interrupts a command in this process (a Ctrl-C or a timeout) while it first imports the reports leaves
# that import half done, and every later report drawn in the same test process then fails with
# "RendererAgg is already registered" (seen in a soak test under load). Importing the reports here,
# before any test runs, takes that first import out of every test.
import takeover.reports.figures  # noqa: E402,F401
import takeover.reports.resources  # noqa: E402,F401

# System tests press Ctrl-C on the commands they start (SIGINT to the command's own session) and
# expect what a terminal's Ctrl-C gives: a KeyboardInterrupt, a clean stop, exit 130. That needs
# SIGINT at its default disposition in the command. A job started in the background by a
# non-interactive shell (`make test &`, nohup, some CI runners) inherits SIGINT *ignored*, passes
# that on through every exec, and the command rightly keeps ignoring it (as any background job
# should): those tests then wait for their timeouts and fail. A handled signal is reset to its
# default at exec, so handling it here gives every command the tests start the terminal's default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# `make test` runs the suite in four processes (pytest-xdist, --dist loadgroup). Each test goes to
# whichever process is free, except that all the tests of a file that defines a module-scoped fixture
# (one real run, or one server, read by several tests) run in one process, one after the other:
# otherwise each process would make that run again. Files that must not run at the same time as
# each other are one group, named here: the wheel and the fresh install both build the checkout in
# place, in its build/ and takeover.egg-info. xdist's own ``xdist_group`` mark would say all this
# per test, but it is silently ignored with pytest 9.2 (its group travels in the test's id, which
# pytest no longer lets a plugin change), so the groups are found here, by file.
XDIST_GROUPS = {
    "tests/system/test_packaging.py": "build_from_checkout",
    "tests/system/test_user_project.py": "build_from_checkout",
    # A network namespace's identity (its inode) is reused once it is freed: one test's namespaces could
    # pass for the leftovers of the run the other one killed.
    "tests/system/test_hosts.py": "hosts",
}
_MODULE_SCOPE = re.compile(r"""scope\s*=\s*["']module["']""")


@functools.cache
def _xdist_group(rootdir: Path, path: str) -> str | None:
    """The group of the tests in ``path`` (relative to ``rootdir``): its name in ``XDIST_GROUPS``, the
    file itself when it defines a module-scoped fixture, else none (each test goes on its own)."""
    if path in XDIST_GROUPS:
        return XDIST_GROUPS[path]
    source = rootdir / path
    if source.suffix == ".py" and source.is_file() and _MODULE_SCOPE.search(source.read_text()):
        return path
    return None


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """xdist's loadgroup scheduling, with the groups of :func:`_xdist_group` (groups go out first,
    those of most tests first; then single tests in file order)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    rootdir = Path(config.rootpath)

    class ByFile(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            group = _xdist_group(rootdir, nodeid.split("::", 1)[0])
            return f"group:{group}" if group else super()._split_scope(nodeid)

    return ByFile(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test marked ``needs_package("fuse3")`` skips where that system package is missing, with one line
    naming what to install, and fails instead under CI=true (tests/helpers/system_packages.py says why)."""
    system_packages.require_packages(item)


@pytest.fixture
def scenario_scratch(tmp_path, monkeypatch):
    """``takeover scenarios`` makes a temporary folder per scenario: here they go to this test's
    ``tmp_path / "scratch"`` (for this process; a subprocess gets it as TMPDIR from its test), so the
    test can check that every one of them was removed afterwards, whatever the queue did."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.setenv("COLUMNS", "140")
    yield scratch
    assert list(scratch.iterdir()) == [], "takeover scenarios left temporary files behind"
