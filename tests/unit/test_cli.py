"""The command line in this process: no command prints the help and exits 2."""

from __future__ import annotations

import pytest

from takeover.cli import main


def test_no_command_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "COMMAND" in capsys.readouterr().out
