"""A task registered again: the checker must not count it twice, nor see anything in it.

The contract says registering a known task changes nothing, so for a correct queue a repeated
registration (from the coordinator or a worker, several at once, with an unknown outcome) must
leave every invariant and every count exactly as the same run without it, except the register
latencies, which it rightly adds to. The cases are in tests/quality/cases.py (``reregister_*``);
tests/quality/test_known_verdicts.py checks their verdicts, including the invalid ones where the
queue did reset the task.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from takeover._internal.pipeline import check_and_report
from tests.quality.cases import CASES

VALID = sorted(name for name, (_, violated) in CASES.items() if name.startswith("reregister_") and not violated)


def _summary(folder: Path) -> dict:
    check_and_report(folder, out=io.StringIO(), reports=False)
    return json.loads((folder / "summary.json").read_text())


def test_there_are_valid_reregister_cases() -> None:
    assert len(VALID) >= 3, VALID


@pytest.mark.parametrize("name", VALID)
def test_a_repeated_registration_changes_no_count(name: str, tmp_path) -> None:
    run = CASES[name][0]()
    assert run.reregistered, "the case registers nothing again"
    with_it = _summary(run.write(tmp_path / "with"))
    without = _summary(run.without_reregisters().write(tmp_path / "without"))
    # the model coverage rightly counts the repeated calls: a known task registered again, in its state
    again = {k: n for k, n in with_it["coverage"]["model"]["cells"].items()
             if k.startswith("register/") and k != "register/absent/never/none"}
    assert again and not any(k.startswith("register/") and k != "register/absent/never/none"
                             for k in without["coverage"]["model"]["cells"])
    for summary in (with_it, without):
        summary["coverage"].pop("model")
        summary["counts"]["latency_ms"].pop("register", None)
        summary.pop("check_seconds")
        summary.pop("run_dir")
        summary.pop("history")  # its line count, which the repeated records add to
    assert with_it["counts"]["tasks"] == len(run.snapshot or [])
    assert with_it["counts"]["unpaired_completions"] == 0
    assert with_it == without
