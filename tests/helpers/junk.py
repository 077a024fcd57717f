"""Hypothesis strategies for answers a queue must never give (issue 34): each value drawn here is malformed
by the queue contract's own words (docs/spec.md, takeover.contract), decided here without takeover._internal.answers,
so the tests that feed them to takeover check that code rather than repeat it.

The moves are the script of the fuzzing queue (tests/fixtures/queues/bad_answers.py ``FuzzQueue``):
``("real",)`` answers as the reference queue does; ``("junk", value)``, ``("huge", n)`` and
``("raise", name, arg)`` are malformed answers (or escapes).
"""

from __future__ import annotations

import json
import math
import shutil
import tempfile
from pathlib import Path
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


# -- stored histories with a damaged lease end (``takeover check``) ----------------------------------------------
STORED_VALID = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "ref-valid"
# A value of a claim's ``lease_until`` that no correct queue answers for now + 0.6: missing (null), of the wrong
# type, or a number at least a second later (pyarrow reads 1e400 as inf).
bad_lease_json = st.one_of(st.none(), st.booleans(), st.text(max_size=6), st.just("1e400"),
                           st.floats(min_value=-1e12, max_value=1e12).map(lambda d: ("far", d)))


def _damage(rec: dict, value) -> str:
    if isinstance(value, tuple):  # a number at least a second past now + lease (earlier is a warning only)
        rec["lease_until"] = rec["now"] + 0.6 + 1 + abs(value[1])
    elif value is None:
        rec.pop("lease_until")
    elif value == "1e400":
        return json.dumps(rec).replace(json.dumps(rec["lease_until"]), "1e400")
    else:
        rec["lease_until"] = value
    return json.dumps(rec)



damaged_leases = st.tuples(st.lists(bad_lease_json, min_size=1, max_size=3), st.integers(0, 200))


def check_damaged(stored: Path, damage: tuple[list[Any], int]) -> tuple[Any, int, Any]:
    """``takeover check`` (in process) on a copy of ``stored`` whose claims, from the ``start``-th on, got the
    lease ends ``values``: the verdict, the exit code (2: refused as bad input) and answers_well_formed's."""
    from takeover._internal.checker import analyse
    from takeover.errors import UsageError

    values, start = damage
    with tempfile.TemporaryDirectory(prefix="takeover-test-") as tmp:
        run = Path(tmp) / "run"
        shutil.copytree(stored, run, ignore=shutil.ignore_patterns("expected-summary.json"))
        lines = (run / "history.jsonl").read_text().splitlines()
        claims = [i for i, line in enumerate(lines) if '"type":"ok","f":"claim"' in line]
        for k, value in enumerate(values):
            i = claims[(start + 7 * k) % len(claims)]
            lines[i] = _damage(json.loads(lines[i]), value)
        (run / "history.jsonl").write_text("\n".join(lines) + "\n")
        try:
            result = analyse(run)
        except UsageError:
            return None, 2, None
        check = result.summary["invariants"].get("answers_well_formed", {}).get("valid")
        return result.verdict, int(result.exit_code), check
