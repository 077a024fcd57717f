"""The command line in this process: no command prints the help and exits 2; the exit codes' numbers.
That the documentation names every command and option is tests/unit/test_docs.py's (the generated reference)."""

from __future__ import annotations

import json

import pytest

from takeover.cli import main
from takeover.exit_codes import ExitCode


def test_no_command_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "COMMAND" in capsys.readouterr().out


def test_the_exit_codes_are_the_documented_numbers() -> None:
    """The numbers are the contract (docs/design.md, CI scripts, shells); the names are only ours."""
    assert {code.name: int(code) for code in ExitCode} == {
        "VALID": 0, "VIOLATED": 1, "USAGE": 2, "INCONCLUSIVE": 3, "INTERRUPTED": 130}
    # summary.json and soak.json hold the number itself, as JSON and as text
    assert json.dumps({"exit_code": ExitCode.INTERRUPTED}) == '{"exit_code": 130}'
    assert f"exit {ExitCode.VIOLATED}" == "exit 1"
