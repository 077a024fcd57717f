"""The duplicate gate: ``--fail-on-duplicates`` fails only the duplicates that the lease and the run's
remedy promise to prevent, ``--max-duplicates-per-1000`` caps the rest (takeover._internal.checker.gate).

Each hand-built history has one extra action of a known cause and, where it matters, a known order:
with ``--remedy none`` only a double lease (``other``) is a broken promise; ``fencing`` adds a stale
generation acting after a newer one; ``idempotency-key`` promises no duplicate at all. The summary of
a run checked without a gate must not change (tests/quality/test_stored_runs.py pins it), so the gate's
section is there only when a gate was asked for.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from takeover._internal.checker import analyse
from takeover.cli import main
from tests.quality.cases import CASES, DUPLICATE_CAUSES

# Cases whose extra action comes from an older generation after a newer one acted: fencing refuses those.
STALE_AFTER_NEWER = {"double_lease_holder_acted_after_the_thief", "slow_holder_outlives_its_extended_lease"}
CASES_WITH_ONE_EXTRA = sorted({**DUPLICATE_CAUSES, "killed_finish_that_did_not_happen": "s5"})
CAUSE = {**DUPLICATE_CAUSES, "killed_finish_that_did_not_happen": "s5"}


def _promised(name: str, remedy: str) -> bool:
    if remedy == "idempotency-key":
        return True
    return CAUSE[name] == "other" or (remedy == "fencing" and name in STALE_AFTER_NEWER)


@pytest.mark.parametrize("remedy", ["none", "fencing", "idempotency-key"])
@pytest.mark.parametrize("name", CASES_WITH_ONE_EXTRA)
def test_fail_on_duplicates_fails_only_what_the_remedy_promised(name: str, remedy: str, tmp_path) -> None:
    folder = CASES[name][0]().write(tmp_path / name, config={"remedy": remedy})
    result = analyse(folder, fail_on_duplicates=True)
    gate = result.summary["duplicate_gate"]
    promised = _promised(name, remedy)
    assert gate["promised"] == int(promised), gate
    assert gate["failed"] is promised and result.summary["failed_on_duplicates"] is promised
    if result.summary["valid"] is True:  # a double lease is also an invariant violation: exit 1 either way
        assert result.exit_code == int(promised)
    tasks = result.summary["counts"]["tasks"]
    assert gate["remedy"] == remedy and gate["per_1000"] == 1000.0 / tasks  # one extra action


def test_the_rate_cap_counts_every_cause_and_both_reach_the_exit_code_and_junit(tmp_path, capsys) -> None:
    folder = CASES["killed_finish_that_did_not_happen"][0]().write(tmp_path / "s5")  # 2 tasks, 1 extra: 500/1000
    assert main(["check", str(folder), "--fail-on-duplicates"]) == 0, "S5 under remedy none is no broken promise"
    out = capsys.readouterr().out
    assert out.startswith("VALID: ") and "duplicate gate passed: 0 that remedy none" in out
    assert main(["check", str(folder), "--max-duplicates-per-1000", "500"]) == 0
    assert "duplicate gate passed: 0 that remedy none and the lease promise to prevent; 500 per 1000 tasks, cap 500" \
        in capsys.readouterr().out
    assert main(["check", str(folder), "--max-duplicates-per-1000", "499.5"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("VALID (duplicates fail this run)")
    assert "duplicate gate FAILED: 500 duplicate side effects per 1000 tasks, above --max-duplicates-per-1000 499.5" \
        in out
    case = [c for c in ET.parse(folder / "junit.xml").getroot().iter("testcase")][-1]
    assert case.get("name") == "no_duplicate_side_effects" and case.find("failure") is not None
    assert "above --max-duplicates-per-1000" in (case.find("failure").text or "")
    assert "**Failed because of duplicate side effects**: 500 duplicate" in (folder / "report.md").read_text()


def test_no_gate_no_section_and_a_bad_cap_is_one_line(tmp_path, capsys) -> None:
    folder = CASES["killed_finish_that_did_not_happen"][0]().write(tmp_path / "s5")
    assert "duplicate_gate" not in analyse(folder).summary
    assert main(["check", str(folder), "--max-duplicates-per-1000", "-1"]) == 2
    err = capsys.readouterr().err
    assert err == "takeover: error: check: argument --max-duplicates-per-1000: must be a number >= 0, got '-1'\n"
