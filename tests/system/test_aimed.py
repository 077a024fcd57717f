"""Aimed faults in real stress runs: each reaches its window, the reference queue keeps every
promise there, and a planted bug is caught by the fault aimed at it.

A record saying ``hit`` is the nemesis' own word. These tests ask the history for the evidence
instead, the way a reader of the run would: the finish of a frozen holder called after its lease
ran out with no claim of its task in between (S2), a stale generation's finish called while a newer
generation's claim holds the task (S3), claims of several workers in the same few milliseconds
(a stampede), a known task registered again by the coordinator and by a worker (a producer's
retry). One run with all four kinds at high rates serves those (module fixture); each planted bug
gets a short run with only its fault on, so nothing else can have exposed it. The checker's side
(pairing, coverage counts, warnings) is pinned on hand-written histories in
tests/quality/test_aimed_coverage.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from takeover._internal.run.aimed import STALE_ORDERS
from tests.helpers.attempts import until_shown
from tests.helpers.processes import reap_stragglers, records, wait_no_stragglers

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]

AIMED = ("expire_and_return", "stale_return", "claim_stampede", "duplicate_register")
STAMPEDE_MS = 10  # how close together a stampede's claims must start


REFERENCE = "takeover.queues.sqlite_lease:SQLiteLeaseQueue"


def stress(run_dir: Path, seed: int, duration: float, queue: str = REFERENCE, **rates: float) -> dict[str, Any]:
    """A short run of the smoke profile with no fault but the aimed ``rates`` on, through the
    Coordinator in this process, checked (no reports: figures cost a second or two a run); its
    summary. Few tasks up front and a steady arrival keep holders busy while faults run, and leave
    little to drain. Nothing of the run outlives the call."""
    from takeover._internal.checker import analyse
    from takeover._internal.config import load_profile
    from takeover._internal.options import FAULT_KINDS
    from takeover._internal.run.coordinator import Coordinator
    from takeover.workloads.worker import worker_main

    faults = dict.fromkeys(FAULT_KINDS, 0.0) | rates
    cfg = dataclasses.replace(load_profile("smoke"), queue=queue, seed=seed, duration=duration, tasks=20,
                              arrival_rate=20, out=str(run_dir), faults=faults).validate()
    run_dir.mkdir(parents=True)
    try:
        result = Coordinator(cfg, run_dir, worker=worker_main).run()
    finally:
        reap_stragglers(run_dir)
    assert not result.interrupted
    return analyse(run_dir).summary


EVERY_AIMED = dict.fromkeys(AIMED, 1.0)


@pytest.fixture(scope="module")
def aimed_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], list[dict[str, Any]]]:
    """One 5 s run with every aimed kind at 1/s on three workers: the gated kinds take turns at the
    claim gate, and on a loaded machine one of them may get no window in; then the next seed runs."""
    root = tmp_path_factory.mktemp("aimed")

    def run(i: int) -> tuple[Path, dict[str, Any], list[dict[str, Any]]]:
        run_dir = root / f"run{i}"
        return run_dir, stress(run_dir, seed=1 + i, duration=5, **EVERY_AIMED), records(run_dir)

    def missing(got: tuple[Path, dict[str, Any], list[dict[str, Any]]]) -> str | None:
        never = [kind for kind in AIMED if not hits(got[2], kind)]
        return f"hit of {', '.join(never)}" if never else None

    return until_shown(run, missing)


def hits(recs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [r for r in recs if r["f"] == kind and r["type"] == "ok" and r.get("value") == "hit"]


def ops(recs: list[dict[str, Any]], f: str, type_: str, **fields: Any) -> Iterator[dict[str, Any]]:
    return (r for r in recs if r["f"] == f and r["type"] == type_ and all(r.get(k) == v for k, v in fields.items()))


def the_claim(recs: list[dict[str, Any]], task: str, gen: int) -> dict[str, Any]:
    """The one claim that returned generation ``gen`` of ``task``."""
    got = list(ops(recs, "claim", "ok", task=task, gen=gen))
    assert len(got) == 1, (task, gen, got)
    return got[0]


def finish_before(recs: list[dict[str, Any]], claim: dict[str, Any], t: float) -> dict[str, Any] | None:
    """The last finish invoke of ``claim``'s generation by its holder before time ``t``."""
    fins = [r for r in ops(recs, "finish", "invoke", process=claim["process"], task=claim["task"], gen=claim["gen"])
            if r["time"] <= t]
    return fins[-1] if fins else None


def test_the_reference_queue_stays_valid_and_every_aimed_fault_hits(aimed_run) -> None:
    run_dir, summary, recs = aimed_run
    assert summary["valid"] is True, {k: v for k, v in summary["invariants"].items() if v["valid"] is not True}
    coverage = summary["coverage"]["aimed"]
    assert list(coverage) == list(AIMED)
    for kind in AIMED:  # the checker counts from the records what the records say
        assert coverage[kind]["hit"] == len(hits(recs, kind)) >= 1, (kind, coverage[kind])
        assert coverage[kind]["total"] == len(list(ops(recs, kind, "invoke")))
    assert not wait_no_stragglers(run_dir, timeout=5)


def test_expire_and_return_finishes_after_the_lease_and_before_any_takeover(aimed_run) -> None:
    """S2's window, every time it is said to be hit: the frozen holder's finish is called with a
    ``now`` past its lease, and no claim returned its task between its own claim and that finish."""
    _, _, recs = aimed_run
    for hit in hits(recs, "expire_and_return"):
        claim = the_claim(recs, hit["task"], hit["gen"])
        assert claim["lease_until"] == hit["lease_until"]
        fin = finish_before(recs, claim, hit["time"])
        assert fin is not None, hit
        assert fin["now"] > hit["lease_until"], (fin, hit)
        taken = [r for r in ops(recs, "claim", "ok", task=hit["task"]) if claim["time"] < r["time"] < fin["time"]]
        assert not taken, (hit, taken)
        frozen = [r for r in ops(recs, "pause", "invoke", detail="expire_and_return", task=hit["task"], gen=hit["gen"])]
        assert [r["target"] for r in frozen] == [claim["process"]]


def test_stale_return_finishes_a_stale_generation_while_a_newer_one_holds_the_task(aimed_run) -> None:
    """S3's window, in both orders. ``stale_first``: generation g's finish is called after generation
    g' > g was granted to another worker, inside g''s lease, and before g''s holder called its own
    finish. ``new_first``: g''s finish has returned before g's finish is called."""
    _, _, recs = aimed_run
    orders = []
    for hit in hits(recs, "stale_return"):
        old = the_claim(recs, hit["task"], hit["gen"])
        new = the_claim(recs, hit["task"], hit["new_gen"])
        assert hit["new_gen"] > hit["gen"] and new["process"] != old["process"]
        fin = finish_before(recs, old, hit["time"])
        assert fin is not None, hit
        assert new["time"] < fin["time"], (new, fin)
        frozen = {r["gen"]: r["target"] for r in ops(recs, "pause", "invoke", detail="stale_return", task=hit["task"])}
        assert frozen[hit["gen"]] == old["process"]
        new_fin = finish_before(recs, new, fin["time"])
        if hit["order"] == "stale_first":
            assert fin["now"] < new["lease_until"], (new, fin)
            assert new_fin is None, "the new holder had finished already"
            assert frozen[hit["new_gen"]] == new["process"]
        else:
            assert hit["order"] == "new_first", hit
            assert new_fin is not None, "the new holder had not called finish"
            key = (new["process"], hit["task"], hit["new_gen"])
            returned = [r for r in recs if r["f"] == "finish" and r["type"] != "invoke"
                        and (r["process"], r.get("task"), r.get("gen")) == key]
            assert returned and returned[0]["time"] < fin["time"], (returned, fin)
        orders.append(hit["order"])
    assert set(orders) == {"stale_first", "new_first"}, orders


def racing(recs: list[dict[str, Any]], hit: dict[str, Any]) -> list[dict[str, Any]]:
    """The claim invokes of the largest group of different workers that started within STAMPEDE_MS
    of each other after the stampede's fresh task was registered and before the window ended."""
    # the first registration: duplicate_register may register that task again later
    fresh = next(ops(recs, "register", "invoke", process=0, task=hit["task"]))
    claims = [r for r in ops(recs, "claim", "invoke") if fresh["time"] <= r["time"] <= hit["time"]]
    groups = [[r for r in claims if first["time"] <= r["time"] <= first["time"] + STAMPEDE_MS / 1000]
              for first in claims]  # fmt: skip
    return max(groups, key=lambda g: len({r["process"] for r in g}), default=[])


def test_claim_stampede_lets_several_workers_claim_at_the_same_instant(aimed_run) -> None:
    """Every hit says at least two of the workers it let go started their claims together, and the
    history agrees: after the stampede registers its fresh task (just before it lets the held
    workers go), claims of at least two different workers start within a few milliseconds."""
    _, _, recs = aimed_run
    for hit in hits(recs, "claim_stampede"):
        assert 2 <= hit["raced"] <= hit["workers"], hit
        assert len({r["process"] for r in racing(recs, hit)}) >= 2, hit


@pytest.mark.parametrize(("queue", "seed"), [("takeover.queues.planted:NonAtomicClaim", 1), (REFERENCE, 1)])
def test_claim_stampede_races_claims_for_one_row(tmp_path: Path, queue: str, seed: int) -> None:
    """Only claim_stampede on. A queue that picks the claimable row outside its write transaction
    (NonAtomicClaim: two claims that overlap pick the same row and both take it) is caught by
    ``lease_exclusive``, on a task whose two overlapping grants came from claims of one stampede's
    racers; the reference queue, under the same races, stays valid."""
    run_dir = tmp_path / "run"
    summary = stress(run_dir, seed=seed, duration=3, queue=queue, claim_stampede=1.5)
    recs = records(run_dir)
    stampedes = hits(recs, "claim_stampede")
    assert stampedes and all(hit["raced"] >= 2 for hit in stampedes), summary["coverage"]["aimed"]
    if queue == REFERENCE:
        assert summary["valid"] is True, {k: v for k, v in summary["invariants"].items() if v["valid"] is not True}
        return
    assert summary["invariants"]["lease_exclusive"]["valid"] is False, summary["invariants"]
    raced = {(r["process"], r["time"]) for hit in stampedes for r in racing(recs, hit)}

    def from_racers(task: str, gen: int) -> bool:
        ok = the_claim(recs, task, gen)
        mine = ops(recs, "claim", "invoke", process=ok["process"])
        return (ok["process"], max(r["time"] for r in mine if r["time"] <= ok["time"])) in raced

    examples = summary["invariants"]["lease_exclusive"]["examples"]
    assert any(from_racers(ex["task"], ex["held_gen"]) and from_racers(ex["task"], ex["granted_gen"])
               for ex in examples), examples  # fmt: skip


def test_duplicate_register_registers_a_known_task_from_the_coordinator_and_workers(aimed_run) -> None:
    """Every hit registers an already registered task again from the coordinator inside its window;
    at least one also from a worker process at that instant."""
    _, _, recs = aimed_run
    starts = [r["time"] for r in ops(recs, "duplicate_register", "invoke")]
    by_workers = []
    for hit in hits(recs, "duplicate_register"):
        began = max(t for t in starts if t < hit["time"])
        regs = [r for r in ops(recs, "register", "invoke", task=hit["task"])]
        assert regs[0]["time"] < began, "the task was not registered before"
        again = [r["process"] for r in regs if began <= r["time"] <= hit["time"]]
        assert 0 in again, (hit, again)
        by_workers.append([p for p in again if p > 0])
    assert any(by_workers), by_workers


def test_the_first_two_stale_returns_open_together_one_per_order(tmp_path: Path) -> None:
    """A short run with stale_return at a rate whose only windows are its first two: they take one
    order each, are open at the same time (the second starts before the first ends), and both reach
    their window, so each of the two bugs they aim at is tried at the start of every run."""
    def run(i: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        run_dir = tmp_path / f"run{i}"
        return stress(run_dir, seed=1 + i, duration=4, stale_return=0.2), records(run_dir)

    def missing(got: tuple[dict[str, Any], list[dict[str, Any]]]) -> str | None:
        reached = {r.get("order") for r in hits(got[1], "stale_return")}
        return None if reached == set(STALE_ORDERS) else f"hit of each order (hit: {sorted(map(str, reached))})"

    summary, recs = until_shown(run, missing)
    assert summary["valid"] is True, {k: v for k, v in summary["invariants"].items() if v["valid"] is not True}
    starts = list(ops(recs, "stale_return", "invoke"))
    ends = list(ops(recs, "stale_return", "ok"))
    assert sorted(r["order"] for r in starts) == sorted(STALE_ORDERS), starts
    assert max(r["time"] for r in starts) < min(r["time"] for r in ends), "the two windows were not open together"
    assert sorted(r["order"] for r in hits(recs, "stale_return")) == sorted(STALE_ORDERS), ends
    assert summary["coverage"]["aimed"]["stale_return"] == {"total": 2, "hit": 2, "missed": 0, "reasons": {}}


@pytest.mark.parametrize("seed", [2, 3])
def test_the_reference_queue_stays_valid_under_every_aimed_fault(tmp_path: Path, seed: int) -> None:
    # 4 s: on a loaded machine the workers take a second or two of it to come up
    summary = stress(tmp_path / "run", seed=seed, duration=4, **EVERY_AIMED)
    assert summary["valid"] is True, {k: v for k, v in summary["invariants"].items() if v["valid"] is not True}
    assert sum(a["hit"] for a in summary["coverage"]["aimed"].values()) >= 4, summary["coverage"]["aimed"]


# The run is 3 s, and on a loaded machine the workers take a second or more to come up. Each
# stale_return bug needs one of its two orders (stale_first for a finish that ignores the generation,
# new_first for one that says True to a done task); both open at the run's start, whatever the seed.
@pytest.mark.parametrize(("queue", "kind", "seed", "invariants"), [
    ("FinishIgnoresLease", "expire_and_return", 1, ("finish_within_lease",)),
    ("FinishIgnoresGeneration", "stale_return", 3, ("no_stale_commit",)),
    ("IdempotentFinish", "stale_return", 1, ("single_finish",)),
    ("RegisterReplaces", "duplicate_register", 1,
     ("no_reclaim_after_terminal", "generation_monotonic", "lease_exclusive", "state_matches_history")),
])  # fmt: skip
def test_a_planted_bug_is_caught_by_the_fault_aimed_at_it(tmp_path: Path, queue: str, kind: str, seed: int,
                                                          invariants: tuple[str, ...]) -> None:
    """Only ``kind`` is on (no kills, pauses, slow tasks or lost replies, and smoke's work never
    outlasts its lease), and a violation names a task that fault's window was reached on."""
    run_dir = tmp_path / "run"
    summary = stress(run_dir, seed=seed, duration=3, queue=f"takeover.queues.planted:{queue}", **{kind: 1.5})
    assert summary["valid"] is False
    assert set(summary["coverage"]["aimed"]) == {kind}
    targeted = {r["task"] for r in hits(records(run_dir), kind)}
    caught = [inv for inv in invariants if summary["invariants"][inv]["valid"] is False]
    assert caught, {k: v["valid"] for k, v in summary["invariants"].items()}
    named = {ex.get("task") for inv in caught for ex in summary["invariants"][inv]["examples"]}
    assert named & targeted, (named, targeted)
