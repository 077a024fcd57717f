"""Power losses in hand-written histories: what the checker holds the queue to across a power loss.

Why hand-written: a real run (tests/system/test_powerloss_run.py) shows that the reference queue with
synchronous=NORMAL breaks its promises and with FULL does not, but which operations it lost is up to the
disk. Here each case states exactly what was answered before the power loss and what the queue did
after it, so the rules are pinned: an answer given before the power loss must hold after it (its
contradiction is a violation, diagnosed as the power loss's), an operation in flight at the cut is
indeterminate either way, and the same contradiction without a power loss between is the queue's own.
"""

from __future__ import annotations

from pathlib import Path

from takeover._internal.checker import analyse
from tests.quality.builder import Run


def _power_loss(r: Run, t: float, *processes: int) -> None:
    """A power loss as the coordinator records it: invoke, the workers' exits, ok."""
    r.rec(t, 0, "invoke", "power_loss", value="1", workers=len(processes))
    for p in processes:
        r.rec(t + 0.01, 0, "ok", "exit", target=p, worker=f"w{p}", pid=10_000 + p, value="-9", detail="power_loss")
    r.rec(t + 0.1, 0, "ok", "power_loss", value="1", workers=len(processes))


def _lost_finish(with_power_loss: bool = True) -> Run:
    """w1's claim and its finish of a were answered, then undone by the power loss: w3 gets generation 1
    again, acts again and finishes again."""
    r = Run()
    r.register("a")
    r.spawn(1, "w1")
    r.work(1, 1, "a", 1)  # claim at 1, action at 2, finish answered True at 3
    if with_power_loss:
        _power_loss(r, 4, 1)
    r.spawn(3, "w3", t=4.2)
    r.work(3, 5, "a", 1)
    r.snap(("a", "done", 1, None))
    return r


def test_an_answered_finish_undone_by_a_power_loss_breaks_the_promises_and_names_the_power_loss(tmp_path: Path):
    result = analyse(_lost_finish().write(tmp_path / "run"))
    violated = {name for name, inv in result.summary["invariants"].items() if inv["valid"] is False}
    assert violated == {"no_reclaim_after_terminal", "generation_monotonic", "single_finish"}
    assert {v["pattern"] for v in result.violations} == {"power_loss"}
    pl = result.summary["power_loss"]
    assert (pl["losses"], pl["reclaims"], pl["reused_generations"], pl["duplicates"]) == (1, 1, 1, 1)
    assert pl["per_loss"] == {"reclaims": 1.0, "reused_generations": 1.0, "duplicates": 1.0}
    assert any(b.startswith("a finish answered True was undone") for b in pl["broken"])
    assert "the power loss at" in result.summary["diagnosis"][0]["sentence"]
    # The second action is the power loss's, not a queue bug's ("other").
    assert result.summary["duplicates"]["by_cause"] == {"s5": 0, "lost_lease": 0, "other": 0, "power_loss": 1}


def test_the_same_contradiction_without_a_power_loss_between_is_the_queues_own(tmp_path: Path):
    result = analyse(_lost_finish(with_power_loss=False).write(tmp_path / "run"))
    assert result.summary["valid"] is False
    assert "power_loss" not in {v["pattern"] for v in result.violations}
    assert "power_loss" not in result.summary
    assert result.summary["duplicates"]["by_cause"] == {"s5": 0, "lost_lease": 0, "other": 1}


def test_what_was_in_flight_at_the_cut_is_indeterminate_and_what_was_answered_survives(tmp_path: Path):
    """w1's finish of a was in flight at the cut (no completion): a taken over after its lease is fine.
    b's finish was answered before the cut and is still done after it: nothing broke."""
    r = Run()
    r.register("a", "b")
    r.spawn(1, "w1")
    r.spawn(2, "w2")
    r.work(2, 0.5, "b", 1)
    r.claim(1, 1, "a", 1)
    r.action(1, 2, "a", 1)
    r.rec(3, 1, "invoke", "finish", task="a", gen=1, outcome="done", now=3)
    _power_loss(r, 3.5, 1, 2)
    r.spawn(3, "w3", t=3.7)
    r.work(3, 7, "a", 2)  # after a's lease (1 + 5)
    r.snap(("a", "done", 2, None), ("b", "done", 1, None))
    result = analyse(r.write(tmp_path / "run"))
    assert result.summary["valid"] is True, result.violations
    pl = result.summary["power_loss"]
    assert pl["losses"] == 1 and pl["violations"] == 0 and pl["broken"] == []
