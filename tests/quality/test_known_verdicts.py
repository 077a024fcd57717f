"""The checker against hand-written histories whose verdicts are known (Knossos/Porcupine style)."""

from __future__ import annotations

import io
import json

import pytest

from takeover._internal.checker import INVARIANTS
from takeover._internal.pipeline import check_and_report
from tests.quality.cases import CASES


@pytest.mark.parametrize("name", sorted(CASES))
def test_known_verdict(name: str, tmp_path) -> None:
    build, violated = CASES[name]
    folder = build().write(tmp_path / name)
    code = check_and_report(folder, out=io.StringIO(), reports=False).exit_code
    summary = json.loads((folder / "summary.json").read_text())
    got = {n for n, inv in summary["invariants"].items() if inv["valid"] is False}
    assert got == violated, json.dumps(summary["invariants"], indent=1)
    assert code == (1 if violated else 0)
    for n in violated:
        inv = summary["invariants"][n]
        assert inv["violations"] >= 1 and inv["examples"], inv


def test_every_invariant_has_a_valid_and_an_invalid_case() -> None:
    caught = set().union(*(v for _, v in CASES.values()))
    assert caught == set(INVARIANTS)
    assert any(not v for _, v in CASES.values())
