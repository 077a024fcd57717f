"""The checker's memory savings change no result: every column that is all missing, or all one text, is held
as one value seen through a read-only view of stride 0 (takeover._internal.history._missing for the columns the
checker does not parse, takeover._internal.checker.ops._shared_if_constant for the operation frames' columns of
one value), and a check with those views must conclude exactly what a check with plain arrays concludes.

Each run is checked twice in this process: as it is, and with both helpers replaced by plain arrays of
the same values. The summaries (bar the check's own time), the violations and every operation frame must
be equal. The runs: the stored fixture runs (a valid reference run, one with heartbeats, two planted bugs
with violations and diagnoses), stored real runs of known cause (violations of most invariants, faults
of every kind, network and power-loss records), and a check_1m history (kills in every phase, pauses past
the lease, lost replies: the bench's mix).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from takeover._internal import history
from takeover._internal.checker import ops
from takeover._internal.checker.check import CheckResult, analyse
from takeover.benchmarks import check_1m
from tests.quality.known_causes import KNOWN, extract

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
STORED = sorted(p for p in RUNS.iterdir() if p.is_dir())
CAUSES = {c.name: c for c in KNOWN}
# Known causes whose runs reach the most paths: several invariants, a network run, a clock-tolerant
# queue, a reset by re-registration.
SOME_CAUSES = ("planted-StealsLiveLeases", "network-AsyncCommit", "user-SkewTolerantFinish",
               "planted-RegisterReplaces", "user-ExtendIgnoresGeneration")
FRAMES = ("claims", "finishes", "actions", "extends", "registers", "faults", "spawns", "exits", "run_events")


def _plain(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both helpers as they were before them: every column a plain, writable array."""

    def missing(kind: str, index: Any) -> pd.Series:
        n = len(index)
        if kind == "string":
            return pd.Series(pd.Categorical.from_codes(np.full(n, -1, dtype=np.int8), categories=[]), index=index)
        return pd.Series(np.full(n, np.nan if kind == "float64" else 0, dtype=kind), index=index)

    monkeypatch.setattr(history, "_missing", missing)
    monkeypatch.setattr(ops, "_shared_if_constant", lambda values: values)


def _views(result: CheckResult) -> int:
    """How many columns of the history and the operation frames are stride-0 views."""
    frames = [result.facts.run.history, *(getattr(result.facts.ops, name) for name in FRAMES)]
    return sum(1 for f in frames for c in f.columns if len(f) > 1 and f[c].to_numpy().strides == (0,))


def _same(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shared = analyse(folder)
    with monkeypatch.context() as m:
        _plain(m)
        plain = analyse(folder)
    assert _views(shared) > 0, "no column was shared: this test would compare a check with itself"
    assert _views(plain) == 0
    a, b = dict(shared.summary), dict(plain.summary)
    a.pop("check_seconds")
    b.pop("check_seconds")
    assert a == b
    assert list(a) == list(b)  # key order too: summary.json is compared as text elsewhere
    assert shared.violations == plain.violations
    assert shared.duplicate_tasks == plain.duplicate_tasks
    for name in FRAMES:
        pd.testing.assert_frame_equal(getattr(shared.facts.ops, name), getattr(plain.facts.ops, name), obj=name)
    for name in ("claims_ok", "claims_ind", "fin_acc", "fin_ind", "fin_rej", "ext_ok", "ext_ind"):
        pd.testing.assert_frame_equal(getattr(shared.facts, name), getattr(plain.facts, name), obj=name)


@pytest.mark.parametrize("stored", STORED, ids=[p.name for p in STORED])
def test_a_stored_run_checks_the_same_with_shared_columns(stored: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _same(stored, monkeypatch)


@pytest.mark.parametrize("name", SOME_CAUSES)
def test_a_run_of_known_cause_checks_the_same_with_shared_columns(name: str, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    _same(extract(CAUSES[name], tmp_path), monkeypatch)


def test_the_bench_history_checks_the_same_with_shared_columns(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    check_1m.generate(tmp_path, 20_000, seed=3)
    _same(tmp_path, monkeypatch)
