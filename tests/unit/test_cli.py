"""The command line in this process: no command prints the help and exits 2; the exit codes' numbers; the
README names every command and option."""

from __future__ import annotations

import argparse
import json
import re

import pytest

from takeover.cli import build_parser, main
from takeover.exit_codes import ExitCode
from tests.helpers.processes import REPO


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


def test_the_readme_names_every_command_and_every_option():
    """Commands and options are public names; the README is where a user looks them up."""
    readme = (REPO / "README.md").read_text()
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    missing = [f"takeover {name}" for name in sub.choices if f"takeover {name}" not in readme]
    missing += [f"{name} {flag}" for name, command in sub.choices.items() for action in command._actions
                for flag in action.option_strings if flag.startswith("--") and flag != "--help"
                and not re.search(re.escape(flag) + r"(?![\w-])", readme)]  # fmt: skip
    assert sub.choices and not missing
