"""Which runs ``takeover selftest`` asks for, without running any: the profile and faulted seconds
each mode gives every stress run; and which moment of a caught run it reports as the first violation."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from takeover._internal.commands.selftest import configure
from takeover._internal.selftest.runs import profile_and_duration
from takeover._internal.selftest.verdict import first_violation


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    configure(parser)
    return parser.parse_args(list(argv))


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ((), ("stress", 10.0)),  # the detection bench's runs: 10 s of the default profile
        (("--quick",), ("smoke", 3.0)),  # the test suite's: short and cheap
        (("--profile", "smoke"), ("smoke", None)),  # a named profile keeps its own duration
        (("--profile", "stress", "--duration", "20"), ("stress", 20.0)),
        (("--duration", "5"), ("stress", 5.0)),
        (("--quick", "--profile", "stress"), ("stress", 3.0)),
        (("--quick", "--duration", "2"), ("smoke", 2.0)),
    ],
)
def test_profile_and_duration_of_every_run(argv: tuple[str, ...], expected: tuple[str, float | None]) -> None:
    assert profile_and_duration(_args(*argv)) == expected


def test_the_first_violation_is_the_violating_operation_not_the_earlier_one_it_names() -> None:
    """A reclaim after a finish names that finish (at 2.1 s, not wrong on its own) beside the reclaim
    (13.6 s); a repeated generation names the previous claim; single_finish lists every accepted
    finish, the repeat being the second."""
    summary: Any = {"invariants": {
        "no_reclaim_after_terminal": {"valid": False, "examples": [
            {"task": "t1", "finished_at": 2.1, "reclaimed_at": 13.6}]},
        "generation_monotonic": {"valid": False, "examples": [
            {"task": "t1", "claimed_at": 13.6, "previous_at": 1.5}]},
        "single_finish": {"valid": False, "examples": [{"task": "t1", "finished_at": [2.1, 13.7]}]},
        "lease_exclusive": {"valid": True, "examples": [{"granted_now": 0.5}]},
    }}
    assert first_violation(summary, ("no_reclaim_after_terminal", "generation_monotonic", "single_finish",
                                      "lease_exclusive")) == 13.6
    assert first_violation(summary, ("single_finish",)) == 13.7
