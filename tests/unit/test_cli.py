"""The command line in this process: no command prints the help and exits 2; the exit codes' numbers.
That the documentation names every command and option is tests/unit/test_docs.py's (the generated reference)."""

from __future__ import annotations

import argparse
import json

import pytest

from takeover.cli import COMMANDS, build_parser, main
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


def test_every_entry_point_keeps_one_error_contract(capsys: pytest.CaptureFixture[str]) -> None:
    """Bad input is ``PROG: error: MESSAGE`` and exit 2, a Ctrl-C one line and exit 130, whichever entry point
    (the command line, the detection bench; the API's run process is test_api's) meets it."""
    from takeover.benchmarks.detection import main as detection_main
    from takeover.errors import under_error_contract

    assert main(["stress", "--workers", "0"]) == ExitCode.USAGE
    assert capsys.readouterr().err == "takeover: error: workers must be a positive integer, got 0\n"
    assert detection_main(["--bugs", "NoSuchBug"]) == ExitCode.USAGE
    assert capsys.readouterr().err.startswith("detection: error: unknown planted bug 'NoSuchBug'; known: ")

    def interrupted() -> int:
        raise KeyboardInterrupt

    assert under_error_contract(interrupted, "detection", interrupted="stopped") == ExitCode.INTERRUPTED
    assert capsys.readouterr().err == "detection: stopped\n"
    with pytest.raises(ZeroDivisionError):  # a bug is not bad input: its traceback goes on its way
        under_error_contract(lambda: 1 // 0)


@pytest.mark.parametrize("name", COMMANDS)
def test_a_command_alone_is_parsed_by_the_same_parser_as_in_the_whole_command_line(name: str) -> None:
    """``takeover NAME ...`` builds NAME's parser alone (cli.build_parser(NAME)): the same options, defaults and
    help as the whole command line's NAME."""
    whole, alone = build_parser(), build_parser(name)
    [sub_whole] = [a for a in whole._actions if isinstance(a, argparse._SubParsersAction)]
    [sub_alone] = [a for a in alone._actions if isinstance(a, argparse._SubParsersAction)]
    assert list(sub_alone.choices) == [name]
    assert sub_alone.choices[name].format_help() == sub_whole.choices[name].format_help()
