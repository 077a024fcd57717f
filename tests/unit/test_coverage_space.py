"""The model-coverage space (takeover._internal.coverage_space): its cells, the impossible ones, and how one call is
classified, on the spec's own scenario steps (docs/spec.md, tick = one logical second)."""

from __future__ import annotations

import pytest

from takeover._internal import coverage_space as cs


def test_every_cell_is_either_possible_or_impossible_with_a_reason() -> None:
    every = cs.cells()
    ruled_out = cs.impossible()
    assert len(every) == len(set(every)) == len(cs.OPS) * len(cs.STATES) * len(cs.CALLERS) * len(cs.TIMES)
    assert set(cs.possible()) | set(ruled_out) == set(every)
    assert not set(cs.possible()) & set(ruled_out)
    assert all(isinstance(why, str) and len(why) > 20 for why in ruled_out.values())
    # finish, extend, resolve: 10 cells on a running task, 1 absent, 2 pending, 3 done, 3 uncertain
    assert sum(k.startswith("finish_done/") for k in cs.possible()) == 19
    assert sum(k.startswith("register/") for k in cs.possible()) == 7


@pytest.mark.parametrize(("cell", "words"), [
    ("finish_done/pending/holder/none", "no holder"),
    ("finish_done/done/expired/none", "clears the lease"),
    ("finish_done/running/holder/past", "'expired'"),
    ("finish_done/running/expired/inside", "run out"),
    ("register/running/stale/inside", "names no caller"),
    ("claim/absent/never/none", "does not exist"),
    ("extend/done/holder/inside", "no lease"),
    ("claim/running/never/none", "always has a lease"),
])
def test_impossible_cells_say_why(cell: str, words: str) -> None:
    assert words in cs.impossible()[cell]


def test_a_queue_without_extensions_cannot_reach_their_cells() -> None:
    plain = cs.possible(())
    assert not any(k.startswith(("extend/", "resolve/")) for k in plain)
    assert "claim/pending/stale/none" not in plain  # only resolve sends a claimed task back to pending
    assert "claim/pending/stale/none" in cs.possible()
    assert "the queue has no extend()" in cs.impossible(())["extend/running/holder/inside"]


def _step(op: str, state: str, caller_gen: int | None, gen: int | None, now: float, lease_until: float | None) -> str:
    caller = cs.caller_of(state, caller_gen, gen, now, lease_until)
    return cs.classify(op, state, caller, now, lease_until if state == "running" else None, cs.SCENARIO_TICK)


def test_the_spec_scenarios_steps_land_in_their_cells() -> None:
    # S1: register, claim, finish done at 8 (lease until 31), B claims after done
    assert _step("register", "absent", None, None, 0, None) == "register/absent/never/none"
    assert _step("claim", "pending", None, 0, 1, None) == "claim/pending/never/none"
    assert _step("finish_done", "running", 1, 1, 8, 31) == "finish_done/running/holder/inside"
    assert _step("claim", "done", None, 1, 10, None) == "claim/done/never/none"
    # S2: B claims at 30 (refused, a tick before the end) and at 31 (the boundary)
    assert _step("claim", "running", None, 1, 30, 31) == "claim/running/never/edge"
    assert _step("claim", "running", None, 1, 31, 31) == "claim/running/never/edge"
    assert _step("claim", "running", None, 1, 33, 31) == "claim/running/never/past"
    # S3: A comes back with generation 1 after B took generation 2 (lease until 61)
    assert _step("finish_done", "running", 1, 2, 32, 61) == "finish_done/running/stale/inside"
    # the holder of an expired lease, just after its end and well past it, and just before it
    assert _step("finish_done", "running", 1, 1, 31.0, 31) == "finish_done/running/expired/edge"
    assert _step("extend", "running", 1, 1, 40, 31) == "extend/running/expired/past"
    assert _step("finish_uncertain", "running", 1, 1, 30.5, 31) == "finish_uncertain/running/holder/edge"
    # a finish with a generation no claim returned; a register of an uncertain task
    assert _step("finish_done", "pending", 0, 0, 3, None) == "finish_done/pending/never/none"
    assert _step("register", "uncertain", 1, 1, 60, None) == "register/uncertain/never/none"


def test_classify_refuses_unknown_coordinates_and_parse_round_trips() -> None:
    with pytest.raises(ValueError, match="operation 'finish'"):
        cs.classify("finish", "running", "holder")
    with pytest.raises(ValueError, match="caller 'owner'"):
        cs.parse("claim/running/owner/edge")
    assert all(cs.parse(k).key == k for k in cs.cells())


def test_important_cells_are_refusals_and_edges() -> None:
    imp = cs.important()
    assert "finish_done/running/stale/inside" in imp
    assert "register/uncertain/never/none" in imp
    assert "finish_done/running/holder/edge" in imp
    assert "finish_done/running/holder/inside" not in imp  # accepted: not where a refusal can be missing
    assert "claim/pending/never/none" not in imp


def test_unreached_needs_names_the_bugs_whose_cells_no_call_reached() -> None:
    needs = {"A": ["extend/running/stale/inside", "extend/running/stale/past"], "B": ["register/uncertain/never/none"]}
    assert cs.unreached_needs(needs, ["extend/running/stale/past"]) == {"B": ["register/uncertain/never/none"]}
    assert cs.unreached_needs(needs, []) == needs


def test_expand_names_the_possible_cells_of_a_pattern() -> None:
    assert cs.expand("finish_done|finish_uncertain/running/stale/inside|edge") == [
        "finish_done/running/stale/inside", "finish_done/running/stale/edge",
        "finish_uncertain/running/stale/inside", "finish_uncertain/running/stale/edge"]
    assert cs.expand("register/*/*/*") == [k for k in cs.possible() if k.startswith("register/")]
    with pytest.raises(ValueError, match="no possible cell"):
        cs.expand("finish_done/pending/holder/none")
    with pytest.raises(ValueError, match="state 'runing'"):
        cs.expand("claim/runing/*/*")
