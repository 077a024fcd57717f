"""An error Hypothesis raises while handling a Ctrl-C is the Ctrl-C (takeover._internal.explorer.core)."""

from __future__ import annotations

import pytest

from takeover._internal.explorer.core import raised_in_an_interrupt


def _raise_during(first: BaseException, then: BaseException) -> BaseException:
    try:
        try:
            raise first
        except BaseException:  # noqa: BLE001 - builds the chain Python makes
            raise then  # noqa: B904 - the implicit context is the point
    except BaseException as exc:  # noqa: BLE001
        return exc


def test_an_assertion_raised_while_a_keyboard_interrupt_was_handled_is_the_interrupt():
    exc = _raise_during(KeyboardInterrupt("signal SIGHUP"), AssertionError())
    assert raised_in_an_interrupt(exc)
    try:  # Hypothesis's own case: the interrupt lands while it handles an AttributeError, then its handler fails
        try:
            try:
                raise AttributeError("_hypothesis_internal_database_key")
            except AttributeError:
                raise KeyboardInterrupt("signal SIGHUP")  # noqa: B904
        except KeyboardInterrupt:
            raise AssertionError  # noqa: B904
    except AssertionError as deeper:
        assert raised_in_an_interrupt(RuntimeError().with_traceback(None)) is False
        wrapped = _raise_during(deeper, RuntimeError("the wrapper"))
        assert raised_in_an_interrupt(deeper) and raised_in_an_interrupt(wrapped)


@pytest.mark.parametrize("first", [AttributeError("x"), ValueError("departure"), None])
def test_an_error_with_no_interrupt_in_its_chain_is_left_as_it_is(first):
    exc = AssertionError("a departure") if first is None else _raise_during(first, AssertionError("a departure"))
    assert not raised_in_an_interrupt(exc)
