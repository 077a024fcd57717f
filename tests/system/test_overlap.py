"""Two calls at once (takeover._internal.scenario.overlap): a call parked inside itself before one of its own
statements, another actor's call in the gap. A claim that reads then writes in two autocommit statements answers every
sequence of one call after another right; it breaks here, in a scenario file and in explore, while correct queues pass.
"""

from __future__ import annotations

import pytest

from takeover._internal.explorer import explore_queue
from takeover._internal.scenario.file import validate_scenarios
from takeover._internal.scenario.replay import run_scenarios
from takeover.contract import REFERENCE_QUEUE
from takeover.errors import UsageError
from tests.helpers.queues import on_path

RACY = "racy_queues:ClaimReadThenWrite"
CORRECT = (REFERENCE_QUEUE, "user_mistakes:UserQueue")


def _two_claims(pause: int = 2) -> dict:
    """A paused claim, a claim in its gap, the resume: the spec's answers, the paused claim first, and the
    other order's (``gap_first``)."""
    return {"lease_seconds": 1, "scenarios": [{"id": "two-claims", "title": "two claims at once", "steps": [
        {"t": 0, "step": "register", "state": "pending"},
        {"t": 0, "actor": "A", "step": "claim", "pause_before_statement": pause, "returns": 1},
        {"t": 0, "actor": "B", "step": "claim", "returns": None},
        {"t": 0, "actor": "A", "step": "resume", "state": "running", "generation": 1, "lease_until": 1,
         "gap_first": {"paused_returns": None, "gap_returns": 1, "state": "running", "generation": 1,
                       "lease_until": 1}},
    ]}]}


def test_a_scenario_files_overlap_fails_a_claim_that_reads_then_writes_and_passes_correct_queues():
    on_path()
    doc = validate_scenarios(_two_claims(), "two-claims.json")
    [racy] = run_scenarios(RACY, doc=doc)
    assert not racy.ok, "the claim in the gap took the task the paused claim had read"
    assert any("returns" in s.mismatches for s in racy.steps), racy.failures()
    for queue in CORRECT:  # the reference holds the write lock there (paused first); UserQueue likewise
        [ok] = run_scenarios(queue, doc=doc)
        assert ok.ok, (queue, ok.failures())


def test_the_other_order_passes_when_the_calls_overlapped():
    """Paused before its first statement, the reference's claim has taken no lock: the claim in the gap takes
    the task first. The file's answers are the paused claim's first; the other order (gap_first) passes too."""
    [ok] = run_scenarios(REFERENCE_QUEUE, doc=validate_scenarios(_two_claims(pause=1), "two-claims.json"))
    assert ok.ok, ok.failures()
    assert ok.steps[2].observed["returns"] == 1  # the gap's claim got it


def test_a_paused_step_without_its_gap_and_resume_is_one_line():
    doc = _two_claims()
    del doc["scenarios"][0]["steps"][3]
    with pytest.raises(UsageError, match="a paused step must be followed by one register, claim"):
        validate_scenarios(doc, "bad.json")


def test_explore_overlaps_catch_a_racy_claim_and_pass_a_correct_queue():
    on_path()
    found = explore_queue(RACY, seed=3, examples=15, shrink_budget=0)
    assert found.failure is not None and "lease_exclusive" in found.failure.invariants, found.message()
    assert any("pause_before_statement" in s.spec for s in found.failure.steps), found.message()
    passed = explore_queue("user_mistakes:UserQueue", seed=1, examples=10)
    assert passed.ok, passed.message()
    stood = {k.split("/")[1] for k in passed.cells["overlaps"]}
    assert "locked" in stood, passed.cells["overlaps"]  # paused inside its transaction, and the gap waited
