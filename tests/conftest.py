"""What every tier of the suite shares: fixture queues importable by name, Ctrl-C that reaches the
commands the tests start, and shared fixtures.

Tests import shared code as ``from tests.helpers.<module> import ...`` (``tests`` is a package, and
pytest's importlib mode imports each test file as part of it). The fixture queues in
tests/fixtures/queues/ are not imported that way: ``takeover`` must find them by plain module name,
as it finds a user's queue, so they go on the path here for commands run in this process, and on
PYTHONPATH (tests/helpers/queues.py) for every subprocess. tests/README.md says where a test goes.
"""

from __future__ import annotations

import signal
import tempfile

import pytest

from tests.helpers import queues

queues.on_path()

# System tests press Ctrl-C on the commands they start (SIGINT to the command's own session) and
# expect what a terminal's Ctrl-C gives: a KeyboardInterrupt, a clean stop, exit 130. That needs
# SIGINT at its default disposition in the command. A job started in the background by a
# non-interactive shell (`make test &`, nohup, some CI runners) inherits SIGINT *ignored*, passes
# that on through every exec, and the command rightly keeps ignoring it (as any background job
# should): those tests then wait for their timeouts and fail. A handled signal is reset to its
# default at exec, so handling it here gives every command the tests start the terminal's default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


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
