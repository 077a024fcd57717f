"""The command line's error contract: bad input is one line on stderr, exit 2, never a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from takeover.cli import COMMANDS, main


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "takeover", *args], capture_output=True, text=True, timeout=60)


def test_every_command_is_offered() -> None:
    out = run("--help")
    assert out.returncode == 0
    for name in COMMANDS:
        assert f"    {name}" in out.stdout, name


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["bogus"], "takeover: error: argument COMMAND: invalid choice: 'bogus'"),
        (["stress", "--lease"], "takeover: error: stress: argument --lease: expected one argument"),
        (["stress", "--no-such-option"], "takeover: error: unrecognized arguments: --no-such-option"),
        (["check"], "takeover: error: check: the following arguments are required"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], expected: str) -> None:
    out = run(*args)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith(expected), lines[0]
    assert "Traceback" not in out.stderr


def test_no_command_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "COMMAND" in capsys.readouterr().out
