"""The queue's answers fuzzed through the real commands (issue 34): a queue whose claim, finish and extend
answer, in turn, real answers and generated junk (wrong types and shapes, NaN and the infinities, huge
numbers, a 5 MB string) or raise generated exceptions (SystemExit, KeyboardInterrupt, BaseException,
GeneratorExit, one whose ``__str__`` raises). Whatever it does:

* the exit code is 0, 1, 2 or 3;
* no traceback on stdout or stderr;
* never VALID once a malformed answer was given (the queue notes each one it gives, in a file of its own);
* nothing left behind (no process of the run).

A few examples in the gate (each a real ``takeover stress`` of a second); many more under the nightly
marker. A generated case that once failed is kept below as an ``@example``.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings

from tests.helpers import junk
from tests.helpers.fuzzing import EXPLORE, SCENARIOS, STRESS, run_fuzzed

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def _fuzz(command: tuple[str, ...], script: dict[str, Any]) -> None:
    outcome = run_fuzzed(command, script)
    assert outcome.code in (0, 1, 2, 3), outcome.said
    assert not outcome.traceback, outcome.said
    assert not outcome.left_behind
    if outcome.bad_given:
        assert outcome.code != 0 and outcome.valid is not True, f"VALID after: {outcome.bad_given[:500]}"


def _settings(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                           HealthCheck.data_too_large])


# The issue's own cases (a 5 MB claim, sys.exit(7) in claim) are tests/system/test_queue_answers.py's.
@_settings(1)
@given(junk.scripts)
@example({"claim": [("real",)], "finish": [("junk", None)], "extend": [("junk", float("nan"))]})
def test_stress_on_a_fuzzing_queue_is_never_valid_and_never_a_traceback(script: dict[str, Any]) -> None:
    _fuzz(STRESS, script)


@_settings(4)
@given(junk.scripts)
@example({"claim": [("raise", "KeyboardInterrupt", None)], "finish": [("real",)], "extend": [("real",)]})
@example({"claim": [("real",)], "finish": [("raise", "Unprintable", "x")], "extend": [("real",)]})
def test_scenarios_on_a_fuzzing_queue_is_never_valid_and_never_a_traceback(script: dict[str, Any]) -> None:
    _fuzz(SCENARIOS, script)


# The nightly tier: the same properties, many more examples, and explore.
@pytest.mark.nightly
@_settings(40)
@given(junk.scripts)
def test_stress_fuzz_nightly(script: dict[str, Any]) -> None:
    _fuzz(STRESS, script)


@pytest.mark.nightly
@_settings(80)
@given(junk.scripts)
def test_scenarios_fuzz_nightly(script: dict[str, Any]) -> None:
    _fuzz(SCENARIOS, script)


@pytest.mark.nightly
@_settings(10)
@given(junk.scripts)
def test_explore_fuzz_nightly(script: dict[str, Any]) -> None:
    _fuzz(EXPLORE, script)
