"""Which runs ``takeover selftest`` asks for, without running any: the profile and faulted seconds
each mode gives every stress run."""

from __future__ import annotations

import argparse

import pytest

from takeover.commands.selftest import _profile_and_duration, configure


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
    assert _profile_and_duration(_args(*argv)) == expected
