"""The aimed faults' bookkeeping, driven in this process over a real phase board: which state
duplicate_register takes next and which order stale_return, who owns the claim gate, that a script
stopped midway opens it again, and that no window opens before the workers are up. What the scripts
do to real workers is tested in tests/system/test_aimed.py.
"""

from __future__ import annotations

import multiprocessing
import random
import time
from collections.abc import Iterable, Sequence
from typing import Any

import pytest

from takeover._internal.config import RunConfig
from takeover._internal.run.aimed import POLL, STALE_ORDERS, AimedFaults, AimedKind, Missed, Script
from takeover._internal.run.board_layout import DONE, LOSE_ASK
from takeover._internal.run.duplicate_register import STATE_CLASSES, pick_registered
from takeover._internal.run.nemesis import AIMED_KINDS
from takeover._internal.run.phases import PhaseBoard, SlotView


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

    def capabilities(self) -> dict[str, bool]:
        return {"extend": True}


def aimed(seed: int = 1, *, running: int | None = 5, rows: list[tuple[str, str]] | None = None,
          phases: Sequence[str | None] = ("idle", "idle")) -> tuple[AimedFaults, PhaseBoard, Hands]:
    """An AimedFaults over a board of ``len(phases)`` workers (None: one still starting, that has
    published nothing yet); slot 0 holds task ``running``."""
    board = PhaseBoard.create(multiprocessing.get_context("spawn"), len(phases))
    for slot, phase in enumerate(phases):
        board.set_owner(slot, slot + 1, 0)
        if phase is None:
            continue
        board.publish(slot, phase, time.time())
    if running is not None:
        board.publish(0, "working", time.time(), task=running, gen=1, lease_until=time.time() + 5)
    hands = Hands(board)
    rows = [("t000001", "pending"), ("t000002", "done"), ("t000003", "uncertain")] if rows is None else rows
    if any(state in ("done", "uncertain") for _, state in rows):
        board.count(0, DONE)  # a finish was accepted: the board says so before the snapshot is asked
    rngs = {name: random.Random(f"{seed}:{name}")
            for name in ("targets", "orders", "duplicate_register", "expire_and_return")}
    faults = AimedFaults(RunConfig(workers=len(phases), seed=seed), board, hands, Producer(rows), rngs, AIMED_KINDS)
    return faults, board, hands


def pick(faults: AimedFaults, wait: float = 0.0) -> tuple[str, str] | None:
    """duplicate_register's choice, waiting up to ``wait`` for the state its deck dealt."""
    return _until_returned(pick_registered(faults, time.time() + wait))


def test_duplicate_register_takes_each_state_once_per_deck_in_a_seeded_order() -> None:
    """Pending, running, done and uncertain, each once per round of four (issue 23: an uncertain task
    was never registered again), pending last; the order of the other three is the seed's."""
    faults, _, _ = aimed()
    picks = [pick(faults) for _ in range(12)]
    classes = [state for state, _ in picks]
    assert STATE_CLASSES == ("pending", "running", "done", "uncertain")
    for deck in range(3):  # every state once in each round of four, whatever the shuffle
        assert sorted(classes[4 * deck:4 * deck + 4]) == sorted(STATE_CLASSES)
        assert classes[4 * deck + 3] == "pending", "a pending task last: it exposes the fewest bugs"
    assert ("running", "t000005") in picks
    assert {tid for state, tid in picks if state == "done"} == {"t000002"}
    assert {tid for state, tid in picks if state == "uncertain"} == {"t000003"}
    again, _, _ = aimed()
    assert [pick(again) for _ in range(12)] == picks
    decks = [aimed(seed)[0] for seed in range(8)]
    orders = {tuple(pick(f)[0] for _ in range(3)) for f in decks}  # type: ignore[index]
    assert len(orders) > 1, "the deck is shuffled by the seed"


def test_duplicate_register_tries_a_dealt_state_it_could_not_find_again_next_window() -> None:
    """Dealt uncertain while no task is uncertain (a run's first second): another state is taken now,
    and uncertain comes again with the next window, not a round later."""
    faults, _, _ = aimed(rows=[("t000001", "pending"), ("t000002", "done")])
    faults._deck = ["pending", "done", "running", "uncertain"]
    assert pick(faults) == ("running", "t000005")
    assert faults._deck == ["pending", "done", "uncertain"], "running's turn is used, uncertain is next"
    faults.producer.rows.append(("t000003", "uncertain"))  # type: ignore[attr-defined]
    assert pick(faults) == ("uncertain", "t000003")
    assert [pick(faults) for _ in range(2)] == [("done", "t000002"), ("pending", "t000001")]


def test_duplicate_register_takes_another_state_when_none_is_in_the_one_dealt() -> None:
    faults, _, _ = aimed(running=None, rows=[("t000001", "pending")])
    assert [pick(faults) for _ in range(6)] == [("pending", "t000001")] * 6
    nothing, _, _ = aimed(running=None, rows=[])
    assert pick(nothing) is None


def test_duplicate_register_waits_for_the_state_it_was_dealt() -> None:
    """A run's first window opens as the workers come up: no task is running yet, and taking a
    pending one instead would test nothing an upsert gets wrong. It waits, within its window, for a
    holder to appear."""
    faults, board, _ = aimed(running=None, rows=[("t000001", "pending")])
    faults._deck = ["running"]
    step = pick_registered(faults, time.time() + 1)
    assert next(step) > 0, "no running task yet: it waits"
    board.publish(1, "working", time.time(), task=7, gen=1, lease_until=time.time() + 5)
    assert _until_returned(step) == ("running", "t000007")


def test_duplicate_register_dealt_uncertain_asks_a_working_worker_to_lose_its_reply_when_none_is() -> None:
    """No task is uncertain: the worker working on a task (slot 0) is asked to lose its next action's
    reply (so its task ends uncertain), and the pick waits for it; with an uncertain task there, nobody is."""
    faults, board, _ = aimed(rows=[("t000001", "pending"), ("t000002", "done")], phases=("idle", "idle"))
    faults._deck = ["uncertain"]
    step = pick_registered(faults, time.time() + 1)
    assert next(step) > 0, "it waits for the task to end uncertain"
    assert board.field(0, LOSE_ASK) == 1.0 and board.field(1, LOSE_ASK) == 0.0
    assert board.lost_reply_asked(0) and not board.lost_reply_asked(0), "taken back once taken"
    faults.producer.rows.append(("t000003", "uncertain"))  # type: ignore[attr-defined]
    assert _until_returned(step) == ("uncertain", "t000003")
    other, board2, _ = aimed()
    other._deck = ["uncertain"]
    assert pick(other) == ("uncertain", "t000003")
    assert board2.field(0, LOSE_ASK) == 0.0
    idle, board3, _ = aimed(running=None, rows=[("t000001", "pending")], phases=("idle",))
    idle._deck = ["uncertain"]
    pick(idle)
    assert board3.field(0, LOSE_ASK) == 1.0, "nobody working: a free worker is asked, for its next action"


def test_duplicate_register_falls_back_to_a_running_task_before_a_pending_one() -> None:
    """Dealt done at a run's start: nothing is done within its patience, a task is running. It takes
    the running one (registering it again shows an upsert's reset too), not a pending one."""
    faults, _, _ = aimed(rows=[("t000001", "pending"), ("t000005", "running")])
    faults._deck = ["done"]
    assert pick(faults, wait=0.05) == ("running", "t000005")


def test_stale_return_takes_each_order_once_per_round_in_a_seeded_order() -> None:
    faults, _, _ = aimed()
    orders = [faults._next_order() for _ in range(6)]
    for r in range(3):
        assert sorted(orders[2 * r:2 * r + 2]) == sorted(STALE_ORDERS)
    assert [aimed()[0]._next_order() for _ in range(1)] == orders[:1]
    assert len({aimed(seed)[0]._next_order() for seed in range(8)}) == 2, "the first order depends on the seed"


def test_the_two_orders_of_stale_return_open_together_and_each_waits_for_its_own() -> None:
    """The first two arrivals take one order each and open at once (a bug needs one of them, and
    either may come first); a third waits while a window of its order is open. The order is on the
    invoke too, so the reader can pair two windows of one kind open together."""
    faults, _, hands = aimed(phases=("idle", "idle", "idle", "idle"))
    now = time.time()
    for _ in range(3):
        faults.arrive("stale_return", now)
    faults.tick(now)
    invokes = [fields["order"] for type_, kind, fields in hands.records if type_ == "invoke"]
    assert sorted(invokes) == sorted(STALE_ORDERS) and len(faults.active) == 2
    third = [order for (kind, order), queue in faults.waiting.items() if queue]
    assert third == [invokes[0]] or third == [invokes[1]]
    faults.tick(time.time())
    assert len([r for r in hands.records if r[0] == "invoke"]) == 2, "its order's window is still open"
    faults.stop()
    ends = [fields["order"] for type_, kind, fields in hands.records if type_ == "ok"]
    assert sorted(ends) == sorted(STALE_ORDERS)


def test_a_stale_return_leaves_a_free_worker_for_each_takeover_awaited() -> None:
    """A stale_return window freezes its holder only if a worker nobody froze is left for its own
    takeover and for the other order's: with two workers, a second window would freeze the one
    that must take the first window's task over, and both would miss."""
    faults, board, _ = aimed(running=None)
    board.publish(0, faults._holder_phases()[0], time.time(), task=5, gen=1, lease_until=time.time() + 5)
    with pytest.raises(Missed, match="fewer than 3 workers were free"):
        next(faults._freeze_holder("stale_return", time.time() - 0.001, {}, spare=2))
    frozen = _until_returned(faults._freeze_holder("stale_return", time.time() + 1, {}, spare=1))
    assert frozen.slot == 0


def test_no_window_opens_before_two_workers_are_up() -> None:
    """A slot that has never published a phase is a worker still starting: arrivals wait until two
    have."""
    faults, board, hands = aimed(running=None, phases=("idle", None, None))
    faults.arrive("claim_stampede", time.time())
    faults.tick(time.time())
    assert not faults.busy and hands.records == []
    board.publish(2, "idle", time.time())
    faults.tick(time.time())
    assert faults.busy and hands.records[0][:2] == ("invoke", "claim_stampede")
    faults.stop()


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


def _says_detail_then(end: str) -> AimedKind:
    """A kind whose script writes its hit's detail, then waits (``end`` "wait") or misses ("miss"):
    stale_heartbeat writes it when the heartbeat returned, before it sees the finish through."""

    def script(faults: AimedFaults, deadline: float, fields: dict[str, Any]) -> Script:
        fields["detail"] = "the heartbeat returned"
        if end == "miss":
            raise Missed("no finish followed")
        while True:
            yield POLL

    return AimedKind(script)


@pytest.mark.parametrize("end", ["wait", "miss"])
def test_a_window_that_wrote_its_detail_then_missed_records_the_miss(end: str) -> None:
    """A window that had written its hit's detail and then missed, or was cut short when faults
    stopped, is recorded as missed with the reason, once (it crashed the run with KeyError: 'detail',
    the detail given twice to the record)."""
    faults, _, hands = aimed(running=None)
    faults.kinds["detailed"] = _says_detail_then(end)
    faults.arrive("detailed", time.time())
    faults.tick(time.time())
    faults.stop()
    reason = "the faulted phase ended first" if end == "wait" else "no finish followed"
    assert [(t, k) for t, k, _ in hands.records] == [("invoke", "detailed"), ("ok", "detailed")]
    assert hands.records[-1][2]["value"] == f"missed: {reason}"
    assert hands.records[-1][2]["detail"] == reason
    assert faults.tally.missed["detailed"] == 1 and not faults.tally.hits["detailed"]


def test_claim_stampede_races_on_a_fresh_task_then_on_an_expiring_one_in_turn() -> None:
    """Every other stampede lines its racers up on a task whose lease runs out (a frozen holder's), not on
    one just registered: two claimers picking one expired row is a race of its own."""
    faults, _, hands = aimed(running=None)
    for _ in range(3):
        faults.arrive("claim_stampede", time.time())
        faults.tick(time.time())
        faults.stop()
    oks = [f for t, k, f in hands.records if (t, k) == ("ok", "claim_stampede")]
    assert [f["race_on"] for f in oks] == ["fresh", "expiring", "fresh"]
    assert all(f["value"].startswith("missed") for f in oks)


def test_no_hold_starts_as_a_stale_return_takeover_is_due() -> None:
    """No claim_stampede or duplicate_register hold starts when a stale_return's frozen holder is
    about to be taken over, since its takeover needs claims to run then."""
    faults, _, _ = aimed()
    faults._takeovers["stale_first"] = (time.time() - 0.5, 3)  # long past: so late, it must not starve the holds
    faults._takeovers["new_first"] = (time.time() + 0.2, 5)  # the other order's is due: that one counts
    with pytest.raises(Missed, match="the claim gate was left to stale_return"):
        next(faults._take_gate("duplicate_register", time.time() - 0.001))
    assert _until_returned(faults._take_gate("expire_and_return", time.time() + 1)) == 1, "its hold ends with a lease"
    faults._open_gate("expire_and_return")
    del faults._takeovers["new_first"]
    assert _until_returned(faults._take_gate("duplicate_register", time.time() + 1)) == 2


def test_no_hold_starts_while_fewer_than_two_workers_are_free() -> None:
    """A hold needs two workers at the gate: while faults keep all but one frozen, it waits rather
    than close the gate and end missed having tested nothing; expire_and_return's gate does not wait."""
    faults, _, _ = aimed(phases=("idle", "idle", "idle"))
    faults.reserved.update({0, 1})  # frozen by aimed faults (at a run's start: both stale_return orders)
    with pytest.raises(Missed, match="fewer than two workers were free"):
        next(faults._take_gate("claim_stampede", time.time() - 0.001))
    assert _until_returned(faults._take_gate("expire_and_return", time.time() + 1)) == 1
    faults._open_gate("expire_and_return")
    faults.reserved.discard(1)
    assert _until_returned(faults._take_gate("claim_stampede", time.time() + 1)) == 2


def test_the_holder_of_a_task_awaiting_its_takeover_is_guarded_from_other_faults() -> None:
    """While a stale_return waits for another worker to take its frozen holder's task over, the
    nemesis' own kills and pauses leave whoever holds that task alone; nobody once it has it."""
    faults, board, _ = aimed(running=5, phases=("idle", "idle", "idle"))
    board.publish(2, "working", time.time(), task=7, gen=1, lease_until=time.time() + 5)
    assert not faults.guards(0)
    faults._takeovers["new_first"] = (time.time(), 5)
    assert faults.guards(0) and not faults.guards(1) and not faults.guards(2)
    faults._takeovers["stale_first"] = (time.time(), 7)  # both orders wait: both tasks' holders are guarded
    assert faults.guards(0) and not faults.guards(1) and faults.guards(2)
    faults._takeovers.clear()
    assert not faults.guards(0) and not faults.guards(2)
