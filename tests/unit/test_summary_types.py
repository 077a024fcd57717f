"""The summary's types describe the summary: every key, its order, and the kind of every value.

Why a test beside mypy: mypy checks the code that builds and reads a summary, but summary.json is
also read by people and CI scripts, and its key order is pinned (tests/quality/test_stored_runs.py).
The TypedDicts in takeover.summary_types claim that order and those values; this walks real
summaries (the stored runs' expected ones, and one checked without a ledger, where the counts are
None and the notes appear) against them, so the types cannot drift from what is written.
"""

from __future__ import annotations

import io
import json
import shutil
import types
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints, is_typeddict

import pytest

from takeover._internal.pipeline import check_and_report
from takeover.summary_types import Summary

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
STORED = sorted(p for p in RUNS.iterdir() if p.is_dir())


def mismatches(value: Any, tp: Any, path: str = "summary") -> list[str]:
    """Where ``value`` (parsed JSON) departs from the type ``tp``: a missing, extra or misplaced key
    of a TypedDict, or a value of another kind."""
    if tp is Any:
        return []
    if is_typeddict(tp):
        if not isinstance(value, dict):
            return [f"{path}: {value!r} is not an object"]
        hints = get_type_hints(tp)
        out = [f"{path}: lacks {k!r}" for k in sorted(tp.__required_keys__ - value.keys())]
        out += [f"{path}: has undeclared {k!r}" for k in value if k not in hints]
        declared_order = [k for k in hints if k in value]
        if [k for k in value if k in hints] != declared_order:
            out.append(f"{path}: keys in the order {list(value)}, declared {declared_order}")
        for key in declared_order:
            out += mismatches(value[key], hints[key], f"{path}.{key}")
        return out
    origin, args = get_origin(tp), get_args(tp)
    if origin in (Union, types.UnionType):
        tried = [mismatches(value, arg, path) for arg in args]
        return [] if any(not t for t in tried) else [f"{path}: {value!r} fits none of {len(args)} types"]
    if origin is Literal:
        return [] if value in args else [f"{path}: {value!r} is not one of {args}"]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{path}: {value!r} is not an object"]
        return [m for k, v in value.items() for m in mismatches(v, args[1], f"{path}[{k!r}]")]
    if origin is list:
        if not isinstance(value, list):
            return [f"{path}: {value!r} is not a list"]
        return [m for i, v in enumerate(value) for m in mismatches(v, args[0], f"{path}[{i}]")]
    kinds: dict[Any, tuple[type, ...]] = {float: (int, float), int: (int,), bool: (bool,), str: (str,),
                                          type(None): (type(None),)}
    ok = isinstance(value, kinds[tp]) and (tp is bool or not isinstance(value, bool))
    return [] if ok else [f"{path}: {value!r} is not {tp.__name__}"]


@pytest.mark.parametrize("stored", STORED, ids=[p.name for p in STORED])
def test_the_types_describe_each_stored_summary(stored: Path) -> None:
    assert mismatches(json.loads((stored / "expected-summary.json").read_text()), Summary) == []


def test_the_types_describe_a_summary_without_a_ledger(tmp_path: Path) -> None:
    """Without a ledger the duplicate and remedy counts are None and each section says why."""
    for name in ("config.json", "history.jsonl", "snapshot.json"):
        shutil.copy2(STORED[0] / name, tmp_path / name)
    check_and_report(tmp_path, out=io.StringIO(), reports=False)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["duplicates"]["note"] == summary["remedy"]["note"] == "no ledger"
    assert mismatches(summary, Summary) == []


def test_the_types_describe_a_summary_with_aimed_faults(tmp_path: Path) -> None:
    """The aimed faults' coverage, which the stored runs (recorded before aimed faults) lack."""
    from tests.quality.cases import CASES

    folder = CASES["overlapping_aimed_faults"][0]().write(tmp_path / "run")
    check_and_report(folder, out=io.StringIO(), reports=False)
    summary = json.loads((folder / "summary.json").read_text())
    assert list(summary["coverage"]["aimed"]) == ["expire_and_return", "stale_return", "claim_stampede",
                                                  "duplicate_register"]
    assert mismatches(summary, Summary) == []
    summary["coverage"]["aimed"]["stale_return"]["reasons"] = ["a list"]
    assert mismatches(summary, Summary) == ["summary.coverage.aimed['stale_return'].reasons: ['a list'] "
                                            "is not an object"]


def test_the_walk_finds_a_departure() -> None:
    """The walk itself can fail: a misplaced key, a missing one, a value of the wrong kind."""
    summary = json.loads((STORED[0] / "expected-summary.json").read_text())
    summary["history"] = {"torn_tail": False, "lines": 1, "corrupt_lines": 0, "corrupt_examples": []}
    summary["counts"].pop("takeovers")
    summary["valid"] = "maybe"
    assert mismatches(summary, Summary) == [
        "summary.valid: 'maybe' fits none of 2 types",
        "summary.counts: lacks 'takeovers'",
        "summary.history: keys in the order ['torn_tail', 'lines', 'corrupt_lines', 'corrupt_examples'], "
        "declared ['lines', 'torn_tail', 'corrupt_lines', 'corrupt_examples']",
    ]
