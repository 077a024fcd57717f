"""The aim_unreached kind's steering, driven in this process: which cell a window aims at, given what the
history reached, and that the calls it makes land in that cell.

The coordinator's side is the real one: the reference queue in a SQLite file, the coordinator's recorded
calls (takeover._internal.run.own_calls) appended to a real history, and that history read back as it grows
(takeover._internal.run.reached), which tests/fixtures/runs holds to the checker's own figure. What the windows that
freeze workers do to real processes is tested by tests/system/test_aim_unreached.py.
"""

from __future__ import annotations

import json
import multiprocessing
import random
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from takeover._internal import coverage_space as cs
from takeover._internal.config import RunConfig
from takeover._internal.coverage_aims import aimable, way
from takeover._internal.history import HistoryWriter
from takeover._internal.run import aim_unreached as au
from takeover._internal.run.aimed import AimedFaults
from takeover._internal.run.ledger import Ledger
from takeover._internal.run.nemesis import AIMED_KINDS
from takeover._internal.run.own_calls import OwnCalls
from takeover._internal.run.phases import PhaseBoard
from takeover._internal.run.reached import Reached
from takeover.queues.sqlite_lease import SQLiteLeaseQueue
from tests.unit.test_aimed import Hands

RUNS = Path(__file__).resolve().parent.parent / "fixtures" / "runs"


class Producer:
    """The coordinator's side over a real queue and history; ``pretend`` adds cells to what was reached."""

    def __init__(self, folder: Path, pretend: set[str]) -> None:
        self.queue = SQLiteLeaseQueue(str(folder / "queue.sqlite"))
        self.hist = HistoryWriter(folder / "history.jsonl", 0)
        self.seen = Reached(folder / "history.jsonl", 1.0)
        self.pretend = pretend
        Ledger(str(folder / "ledger.sqlite")).close()  # the service's record: a resolve asks it first
        self.calls = OwnCalls(self.hist, 1.0, folder / "ledger.sqlite", lambda _n, fn, *args: fn(*args))

    def reached(self) -> set[str]:
        return set(self.seen.update()) | self.pretend

    def rows(self) -> list[tuple[str, str, int, float | None]] | None:
        return [(str(t), str(s), int(g), lu) for t, s, g, lu in self.queue.snapshot()]

    def ask(self, op: str, task: str, gen: int) -> bool | float | None:
        return self.calls.ask(self.queue, op, task, gen)

    def register_again(self, ids: Sequence[str]) -> int:
        return len(ids)

    def register_new(self) -> str | None:
        return None

    def states(self) -> list[tuple[str, str]] | None:
        return None

    def capabilities(self) -> dict[str, bool]:
        return {"extend": True, "resolve": True}

    def worker_finishes(self, task: str) -> None:
        """A worker's register, claim and finish(done) of ``task``, recorded as a worker records them."""
        now = time.time()
        self.hist.write("invoke", "register", task=task, now=now)
        self.queue.register(task, now)
        self.hist.write("ok", "register", task=task)
        self.hist.write("invoke", "claim", worker="w0", now=now, lease=1.0)
        got = self.queue.claim("w0", now, 1.0)
        assert got is not None
        self.hist.write("ok", "claim", worker="w0", task=got[0], gen=got[1], lease_until=got[2], now=now)
        self.hist.write("invoke", "finish", task=task, gen=got[1], outcome="done", now=now)
        assert self.queue.finish(task, got[1], "done", now)
        self.hist.write("ok", "finish", task=task, gen=got[1], outcome="done", value="true")


def steered(folder: Path, pretend: set[str], seed: int = 1) -> tuple[AimedFaults, Producer, Hands]:
    board = PhaseBoard.create(multiprocessing.get_context("spawn"), 2)
    for slot in range(2):
        board.set_owner(slot, slot + 1, 0)
        board.publish(slot, "idle", time.time())
    producer = Producer(folder, pretend)
    hands = Hands(board)
    rngs = {name: random.Random(f"{seed}:{name}") for name in ("targets", "orders", au.KIND)}
    faults = AimedFaults(RunConfig(workers=2, seed=seed, lease=1.0), board, hands, producer, rngs, AIMED_KINDS)
    return faults, producer, hands


def window(faults: AimedFaults, hands: Hands) -> dict:
    """One aim_unreached window, run to its end; its end record's fields."""
    for _ in faults._run(au.KIND, "", time.time()):
        pass
    kind, f, fields = hands.records[-1]
    assert (kind, f) == ("ok", au.KIND)
    return fields


@pytest.mark.parametrize(
    "target",
    [
        "finish_uncertain/done/never/none",
        "finish_uncertain/done/holder/none",
        "extend/done/holder/none",
        "finish_uncertain/absent/never/none",
    ],
)
def test_a_window_aims_at_the_one_cell_not_reached_and_its_call_lands_there(tmp_path: Path, target: str) -> None:
    """Every other cell a window can aim at counts as reached: the window aims at ``target``, says so on
    its end record, and the history read back places the coordinator's call there (a correct queue
    refuses it: the task stays done)."""
    pretend = set(aimable(cs.ALL_EXTENSIONS)) - {target}
    faults, producer, hands = steered(tmp_path, pretend)
    producer.worker_finishes("t000001")
    assert target not in producer.reached()
    fields = window(faults, hands)
    assert fields["cell"] == target and fields["value"] == "hit", fields
    assert target in producer.seen.update()
    assert producer.queue.snapshot()[0][1] == "done"
    recs = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]
    refused = [r for r in recs if r["process"] == 0 and r["f"] in ("finish", "extend") and r["type"] == "fail"]
    assert refused, "the coordinator's call is recorded, refused"


def test_a_window_goes_to_the_next_cell_once_its_cell_is_reached(tmp_path: Path) -> None:
    """Two cells left: the first window takes one, the next the other (the plan's order), and once the run
    reached every cell a window says so and calls nothing."""
    left = {"resolve/absent/never/none", "finish_uncertain/done/holder/none"}
    faults, producer, hands = steered(tmp_path, set(aimable(cs.ALL_EXTENSIONS)) - left)
    producer.worker_finishes("t000001")
    first = window(faults, hands)["cell"]
    second = window(faults, hands)["cell"]
    assert {first, second} == left
    last = window(faults, hands)
    assert "cell" not in last and last["detail"] == "every cell a window can aim at was reached or tried 2 times"


def test_the_order_of_cells_is_the_seeds_calls_first_important_ones_first(tmp_path: Path) -> None:
    plans = {}
    for i, seed in enumerate((1, 1, 2, 3)):
        (tmp_path / str(i)).mkdir()
        faults, _, _ = steered(tmp_path / str(i), set(), seed=seed)
        plans.setdefault(seed, []).append(au.plan(faults))
    assert plans[1][0] == plans[1][1]
    assert len({tuple(p[0]) for p in plans.values()}) == 3
    important = set(cs.important(cs.ALL_EXTENSIONS))
    order = plans[1][0]
    assert sorted(order) == sorted(aimable(cs.ALL_EXTENSIONS))
    ranks = [(au.WAY_ORDER.index(way(c)), c not in important) for c in order]
    assert ranks == sorted(ranks)


def test_each_situation_of_issue_36_has_a_way() -> None:
    """A lost reply then a stale return, a stale holder's finish(uncertain), heartbeats and resolves from
    every kind of caller, and every finish and heartbeat at a lease's edge."""
    assert way("finish_uncertain/running/stale/inside") == "lost_stale"
    assert way("extend/running/holder/inside") == "beat"
    for caller in ("holder", "stale", "expired", "never"):
        for op in ("extend", "resolve", "finish_done", "finish_uncertain"):
            cells = [c for c in cs.possible() if c.startswith(f"{op}/running/{caller}/") and not c.endswith("/inside")]
            assert cells and all(way(c) == "hold" for c in cells), (op, caller)
    assert way("finish_done/running/holder/inside") is None, "every task's own finish: never the coordinator's"
    assert way("claim/pending/never/none") is None


def test_the_online_reckoning_agrees_with_the_checker_on_stored_runs() -> None:
    """takeover._internal.run.reached, what the nemesis steers by, places every call of a stored run where the
    checker's model coverage does (snapshots apart: the probes are the checker's alone)."""
    for run in sorted(RUNS.iterdir()):
        model = json.loads((run / "expected-summary.json").read_text())["coverage"]["model"]
        lease = json.loads((run / "config.json").read_text()).get("lease")
        online = Reached(run / "history.jsonl", lease).update()
        assert online == {k for k in model["cells"] if not k.startswith("snapshot/")}, run.name


def test_a_cell_windows_aimed_at_twice_without_reaching_it_is_left(tmp_path: Path) -> None:
    """A cell the run does not reach although windows aim at it (here the queue call is not recorded, so the
    history never shows it) takes two windows, not every window of the run."""
    target = "finish_done/absent/never/none"
    faults, producer, hands = steered(tmp_path, set(aimable(cs.ALL_EXTENSIONS)) - {target})
    producer.ask = lambda op, task, gen: None  # type: ignore[method-assign]
    assert [window(faults, hands).get("cell") for _ in range(3)] == [target, target, None]
    assert hands.records[-1][2]["detail"] == f"every cell a window can aim at was reached or tried {au.TRIES} times"


@pytest.mark.parametrize("performed", [True, False])
def test_the_coordinators_resolve_of_an_uncertain_task_says_what_the_ledger_holds(tmp_path: Path,
                                                                                   performed: bool) -> None:
    """The one call of the coordinator's a correct queue accepts: resolve at the generation that ended the
    task uncertain, to done when the ledger holds its action, else back to pending (as takeover reconcile)."""
    producer = Producer(tmp_path, set())
    now = time.time()
    producer.queue.register("t000001", now)
    task, gen, _lease = producer.queue.claim("w0", now, 1.0)  # type: ignore[misc]
    assert producer.queue.finish(task, gen, "uncertain", now)
    if performed:
        ledger = Ledger(str(tmp_path / "ledger.sqlite"))
        ledger.act(task, gen, worker="w0", process=1, key=task, lose_reply=True)
        ledger.close()
    assert producer.ask("resolve", task, gen) is True
    assert producer.queue.snapshot()[0][1] == ("done" if performed else "pending")
    recs = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]
    assert [(r["type"], r["value"]) for r in recs if r["f"] == "resolve"] == [
        ("invoke", "done" if performed else "pending"), ("ok", "done" if performed else "pending")]


def test_a_malformed_answer_to_the_coordinators_call_is_recorded_as_one(tmp_path: Path) -> None:
    """A finish answering what the contract does not allow (not a bool) is an ``info`` completion and an
    ``answer`` record, as a worker records its own (answers_well_formed), never a refusal."""
    producer = Producer(tmp_path, set())
    producer.calls.call = lambda _n, _fn, *_args: "yes"  # the queue's answer, whatever was asked
    assert producer.ask("finish_done", "t000001", 0) is None
    recs = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]
    assert [(r["type"], r["f"]) for r in recs] == [("invoke", "finish"), ("info", "finish"), ("info", "answer")]
    assert recs[-1]["value"] == "finish" and "yes" in recs[-1]["detail"]
