"""The aimed faults' bookkeeping, driven in this process over a real phase board: which state
duplicate_register takes next and which order stale_return, who owns the claim gate, and that a
script stopped midway opens it again. What the scripts do to real workers is tested in
tests/system/test_aimed.py.
"""

from __future__ import annotations

import multiprocessing
import random
import time
from collections.abc import Iterable, Sequence
from typing import Any

import pytest

from takeover.config import RunConfig
from takeover.run.aimed import STALE_ORDERS, STATE_CLASSES, AimedFaults, Missed
from takeover.run.phases import PhaseBoard, SlotView


class Hands:
    """Stands in for the nemesis' effectors: the live workers are the board's slots, nothing is
    signalled, and every record is kept."""

    def __init__(self, board: PhaseBoard) -> None:
        self.board = board
        self.records: list[tuple[str, str, dict[str, Any]]] = []

    def candidates(self, phases: Iterable[str] | None = None) -> list[int]:
        wanted = None if phases is None else set(phases)
        return [s for s in range(self.board.slots) if wanted is None or self.board.phase(s) in wanted]

    def probe(self, slot: int) -> SlotView | None:
        return self.board.read(slot)

    def release(self, slot: int) -> None:
        pass

    def freeze(self, slot: int, view: SlotView, kind: str, planned: float) -> Any:
        return slot

    def thaw(self, token: Any) -> None:
        pass

    def record(self, type_: str, kind: str, **fields: Any) -> None:
        self.records.append((type_, kind, fields))


class Producer:
    def __init__(self, states: list[tuple[str, str]]) -> None:
        self.rows = states

    def register_again(self, ids: Sequence[str]) -> int:
        return len(ids)

    def register_new(self) -> str | None:
        return "t000999"

    def states(self) -> list[tuple[str, str]] | None:
        return self.rows


def aimed(seed: int = 1, *, running: int | None = 5, rows: list[tuple[str, str]] | None = None,
          phases: Sequence[str] = ("idle", "idle")) -> tuple[AimedFaults, PhaseBoard, Hands]:
    """An AimedFaults over a board of ``len(phases)`` workers; slot 0 holds task ``running``."""
    board = PhaseBoard.create(multiprocessing.get_context("spawn"), len(phases))
    for slot, phase in enumerate(phases):
        board.set_owner(slot, slot + 1, 0)
        board.publish(slot, phase, time.time())
    if running is not None:
        board.publish(0, "working", time.time(), task=running, gen=1, lease_until=time.time() + 5)
    hands = Hands(board)
    rows = [("t000001", "pending"), ("t000002", "done"), ("t000003", "uncertain")] if rows is None else rows
    rngs = {name: random.Random(f"{seed}:{name}")
            for name in ("targets", "orders", "duplicate_register", "expire_and_return")}
    return AimedFaults(RunConfig(workers=len(phases), seed=seed), board, hands, Producer(rows), rngs), board, hands


def test_duplicate_register_takes_each_state_once_per_deck_in_a_seeded_order() -> None:
    faults, _, _ = aimed()
    picks = [faults._pick_registered() for _ in range(9)]
    classes = [state for state, _ in picks]
    for deck in range(3):  # every state once in each round of three, whatever the shuffle
        assert sorted(classes[3 * deck:3 * deck + 3]) == sorted(STATE_CLASSES)
        assert classes[3 * deck + 2] == "pending", "a pending task last: it exposes the fewest bugs"
    assert ("running", "t000005") in picks
    assert {tid for state, tid in picks if state == "terminal"} <= {"t000002", "t000003"}
    again, _, _ = aimed()
    assert [again._pick_registered() for _ in range(9)] == picks
    decks = [aimed(seed)[0] for seed in range(8)]
    orders = {tuple(f._pick_registered()[0] for _ in range(3)) for f in decks}
    assert len(orders) > 1, "the deck is shuffled by the seed"


def test_duplicate_register_takes_another_state_when_none_is_in_the_one_dealt() -> None:
    faults, _, _ = aimed(running=None, rows=[("t000001", "pending")])
    assert [faults._pick_registered() for _ in range(6)] == [("pending", "t000001")] * 6
    nothing, _, _ = aimed(running=None, rows=[])
    assert nothing._pick_registered() is None


def test_stale_return_takes_each_order_once_per_round_in_a_seeded_order() -> None:
    faults, _, _ = aimed()
    orders = [faults._next_order() for _ in range(6)]
    for r in range(3):
        assert sorted(orders[2 * r:2 * r + 2]) == sorted(STALE_ORDERS)
    assert [aimed()[0]._next_order() for _ in range(1)] == orders[:1]
    assert len({aimed(seed)[0]._next_order() for seed in range(8)}) == 2, "the first order depends on the seed"


def _until_returned(step: Any) -> Any:
    """Run a script's building block to its end; its return value."""
    try:
        while True:
            next(step)
    except StopIteration as done:
        return done.value


def test_one_aimed_fault_at_a_time_owns_the_claim_gate() -> None:
    faults, board, _ = aimed()
    hold = _until_returned(faults._take_gate("claim_stampede", time.time() + 1))
    assert faults.gate_owner == "claim_stampede" and board.gate() == hold == 1
    waiting = faults._take_gate("duplicate_register", time.time() - 0.001)
    with pytest.raises(Missed, match="claims stayed held by claim_stampede"):
        next(waiting)
    faults._open_gate("duplicate_register")  # not its gate: nothing changes
    assert board.gate() == 1 and faults.gate_owner == "claim_stampede"
    faults._open_gate("claim_stampede")
    assert board.gate() == 0 and faults.gate_owner is None
    # expire_and_return hunts for its holder only while nobody owns the gate, and does not own it
    # meanwhile (owning it, it kept the other gated faults waiting for seconds): claims go on.
    _until_returned(faults._take_gate("claim_stampede", time.time() + 1))
    hunt = faults._freeze_holder("expire_and_return", time.time() - 0.001, {}, gated=True)
    with pytest.raises(Missed, match="claims were held by claim_stampede"):
        next(hunt)
    assert faults.gate_owner == "claim_stampede"


def test_a_script_stopped_midway_opens_the_gate_and_records_the_miss() -> None:
    """When faults stop while a stampede holds the claims back (here: it waits for workers to reach
    the gate), the gate opens again (else every worker would wait forever) and the record says why."""
    faults, board, hands = aimed(running=None)
    faults.arrive("claim_stampede", time.time())
    faults.tick(time.time())
    assert board.gate() != 0 and faults.busy
    faults.stop()
    assert board.gate() == 0 and faults.gate_owner is None and not faults.busy
    assert [(t, k) for t, k, _ in hands.records] == [("invoke", "claim_stampede"), ("ok", "claim_stampede")]
    assert hands.records[-1][2]["value"] == "missed: the faulted phase ended first"
    assert faults.tally.missed["claim_stampede"] == 1
