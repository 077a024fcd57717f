"""Hypothesis strategies for answers a queue must never give (issue 34): each value drawn here is malformed
by the queue contract's own words (docs/spec.md, takeover.contract), decided here without takeover.answers,
so the tests that feed them to takeover check that code rather than repeat it.

The moves are the script of the fuzzing queue (tests/fixtures/queues/bad_answers.py ``FuzzQueue``):
``("real",)`` answers as the reference queue does; ``("junk", value)``, ``("huge", n)`` and
``("raise", name, arg)`` are malformed answers (or escapes).
"""

from __future__ import annotations

import math
from typing import Any

from hypothesis import strategies as st

BAD_FLOATS = st.sampled_from([math.nan, math.inf, -math.inf])
RAISED = ("SystemExit", "KeyboardInterrupt", "BaseException", "GeneratorExit", "ValueError", "Unprintable")
HUGE = 5_000_000  # characters: the 5 MB claim answer of the issue


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _finite_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and abs(v) < 1e308 and math.isfinite(v)


scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**80), max_value=2**80), st.floats(),
                    st.text(max_size=12), st.binary(max_size=8), BAD_FLOATS)
junk = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4), st.tuples(inner, inner),
                                                     st.dictionaries(st.text(max_size=4), inner, max_size=3)),
                    max_leaves=6)
ids = st.text(min_size=1, max_size=8)
finite = st.floats(min_value=0, max_value=1e10, allow_nan=False, allow_infinity=False)

# claim: None or (task_id: str, generation: int >= 1, lease_until: finite float); anything else is malformed.
bad_claims = st.one_of(
    junk.filter(lambda v: v is not None and not (isinstance(v, tuple | list) and len(v) == 3)),
    st.tuples(junk.filter(lambda v: not isinstance(v, str)), st.integers(1, 9), finite),
    st.tuples(ids, junk.filter(lambda v: not (_int(v) and 1 <= v <= 2**53)), finite),
    st.tuples(ids, st.integers(1, 9), st.one_of(BAD_FLOATS, junk.filter(lambda v: not _finite_number(v)))),
)
# finish and resolve: a bool, nothing else (None is not "rejected").
bad_bools = junk.filter(lambda v: v is not True and v is not False)
# extend: None or a finite number.
bad_extends = st.one_of(BAD_FLOATS, junk.filter(lambda v: v is not None and not _finite_number(v)))
raises = st.tuples(st.just("raise"), st.sampled_from(RAISED), st.one_of(st.none(), st.integers(-3, 300),
                                                                        st.text(max_size=10)))


def moves(bad: st.SearchStrategy[Any]) -> st.SearchStrategy[list[tuple[Any, ...]]]:
    """A method's script: a few answers in turn, real ones and malformed ones."""
    one = st.one_of(st.just(("real",)), bad.map(lambda v: ("junk", v)), raises)
    return st.lists(one, min_size=1, max_size=4)


def _has_bad(script: dict[str, list[tuple[Any, ...]]]) -> bool:
    return any(m[0] != "real" for ms in script.values() for m in ms)


claim_moves = st.one_of(moves(bad_claims), st.just([("real",), ("huge", HUGE)]))
scripts = st.fixed_dictionaries({"claim": claim_moves, "finish": moves(bad_bools),
                                 "extend": moves(bad_extends)}).filter(_has_bad)
