"""takeover._internal.answers, the one check of every answer of the queue, fuzzed with answers malformed by the
contract's own words (tests/helpers/junk.py): every one is refused with one short line that quotes it, none is let
through, nothing else is raised; a well-formed answer is taken as it is. Then ``takeover check`` on stored
histories whose answers were damaged the same way: never VALID, never a traceback."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from takeover._internal import answers
from tests.helpers import junk

SPEC = "fuzz:Queue"
GATE = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
STORED = junk.STORED_VALID


def _refused(check, value) -> str:
    with pytest.raises(answers.MalformedAnswer) as caught:
        check(value, SPEC)
    text = str(caught.value)
    assert "\n" not in text and len(text) < 700, text
    return text


@GATE
@given(junk.bad_claims)
@example("7" * 5_000_000)  # issue 34: a 5 MB string crashed the workers
@example(("t1", 1, math.nan))
@example(("t1", 1, math.inf))
@example(("t1", True, 5.0))
@example(("t1", 0, 5.0))
@example(("t1", 1, 10**400))
def test_a_malformed_claim_is_refused_in_one_line(value) -> None:
    assert _refused(answers.claim, value).startswith(f"queue {SPEC!r}: claim() returned")


@GATE
@given(junk.bad_bools)
@example(None)  # issue 34: finish() returning None was blamed on the queue's semantics
@example(1)
def test_a_finish_or_resolve_other_than_a_bool_is_refused(value) -> None:
    assert "the contract wants True (accepted) or False" in _refused(answers.finish, value)
    _refused(answers.resolve, value)


@GATE
@given(junk.bad_extends)
def test_a_malformed_extend_is_refused(value) -> None:
    _refused(answers.extend, value)


@GATE
@given(st.lists(st.one_of(junk.junk, st.tuples(junk.ids, junk.junk, junk.junk, junk.junk)), min_size=1, max_size=4))
def test_a_snapshot_is_taken_as_the_contract_says_or_refused(rows) -> None:
    try:
        out = answers.snapshot(rows, SPEC)
    except answers.MalformedAnswer as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 900
        return
    for task, state, gen, until in out:  # taken: only what the contract allows
        assert isinstance(task, str) and state in answers.STATES and type(gen) is int and gen >= 0
        assert until is None or (type(until) is float and math.isfinite(until))


@given(junk.ids, st.integers(1, 2**53), junk.finite)
def test_a_well_formed_claim_is_taken_as_it_is(task, gen, until) -> None:
    assert answers.claim((task, gen, until), SPEC) == (task, gen, float(until))
    assert answers.claim(None, SPEC) is None
    assert answers.finish(True, SPEC) is True and answers.extend(None, SPEC) is None


@given(junk.junk)
def test_quote_never_raises_and_stays_short(value) -> None:
    assert len(answers.quote(value)) <= 2 * answers.QUOTE + 40


def test_an_exception_whose_str_raises_is_still_one_line() -> None:
    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    assert answers.exception_text(Unprintable()) == "Unprintable: <its message cannot be read: __str__ raised>"
    escape = answers.escaped("claim", SystemExit(7))
    assert isinstance(escape, answers.QueueEscaped) and "claim() raised SystemExit: 7" in str(escape)


@pytest.mark.parametrize(("method", "got", "old", "named"), [
    ("claim", 10.0 + 1000 * 0.6, None, True),  # a unit mix-up
    ("claim", 10.6, None, False),
    ("claim", 10.6 + 5e-4, None, False),  # a library's microsecond rounding
    ("extend", 10.6, 12.0, True),  # an extend that shortened the lease
    ("extend", 12.0, 12.0, False),  # max(old, now + lease)
    ("extend", 50.0, None, False),  # old unknown: longer than now + lease may be the old one
    ("extend", 9.0, None, True),
])
def test_a_lease_end_other_than_the_one_asked_for_is_named_with_both_values(method, got, old, named) -> None:
    said = answers.lease_departure(method, got, 10.0, 0.6, old)
    assert (said is not None) is named
    if said:
        assert said.startswith(f"{method} returned lease_until {got!r}, expected ")


# -- check on damaged histories ------------------------------------------------------------------------------
@settings(max_examples=15, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(junk.damaged_leases)
def test_check_of_a_history_with_a_malformed_lease_end_is_never_valid(damage) -> None:
    verdict, code, check = junk.check_damaged(STORED, damage)
    if code == 2:  # a history pyarrow cannot read as one: bad input (exit 2), one line
        return
    assert verdict is False and code == 1 and check is False
