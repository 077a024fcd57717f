"""The reference queue against a pure model of the spec, under random interleavings.

Why a model: the spec's two rules (what is claimable, when a finish is accepted) are small enough
to state in ten lines of Python, and every interleaving of register / claim / finish / reopen /
clock moves must agree with them — returns and the full snapshot, after every step. Times are
drawn so that claims and finishes land exactly on lease boundaries (now == lease_until) and just
below them, where an off-by-one lives; finishes use current, stale and future generations.
"""

from __future__ import annotations

import math
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from takeover.queues.sqlite_lease import SQLiteLeaseQueue

TASKS = ("a", "b", "c")
WORKERS = ("A", "B")
LEASES = (0.5, 1.0, 5.0, 30.0)
CLOCK_STEPS = (0.0, 0.25, 0.5, 1.0, 5.0, 30.0)


@dataclass
class Row:
    state: str = "pending"
    generation: int = 0
    lease_until: float | None = None


class Model:
    """The spec (docs/spec.md, "Model"), nothing more."""

    def __init__(self) -> None:
        self.rows: dict[str, Row] = {}

    def register(self, task: str) -> None:
        self.rows.setdefault(task, Row())

    def claimable(self, now: float) -> set[str]:
        return {
            t for t, r in self.rows.items()
            if r.state == "pending" or (r.state == "running" and r.lease_until <= now)
        }

    def take(self, task: str, now: float, lease: float) -> tuple[int, float]:
        row = self.rows[task]
        row.state, row.generation, row.lease_until = "running", row.generation + 1, now + lease
        return row.generation, row.lease_until

    def finish(self, task: str, generation: int, outcome: str, now: float) -> bool:
        row = self.rows.get(task)
        if row is None or row.generation != generation or row.state != "running" or not now < row.lease_until:
            return False
        row.state, row.lease_until = outcome, None
        return True

    def snapshot(self) -> list[tuple[str, str, int, float | None]]:
        return sorted((t, r.state, r.generation, r.lease_until) for t, r in self.rows.items())


class QueueVersusModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="takeover-prop-")
        self.path = str(Path(self.dir) / "queue.sqlite")
        self.queue = SQLiteLeaseQueue(self.path)
        self.model = Model()
        self.now = 0.0
        self.boundaries: set[float] = set()  # every lease_until ever granted

    def teardown(self) -> None:
        self.queue.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @initialize(task=st.sampled_from(TASKS))
    def first_task(self, task: str) -> None:
        self.register(task)

    # ------------------------------------------------------------------------------ clock moves

    @rule(data=st.data())
    def move_clock(self, data: st.DataObject) -> None:
        """Forward by a small or lease-sized step, exactly onto a granted lease_until, or onto the
        last float before one. Jumps may go back in time: the queue must use the `now` it is
        given, and the clocks of different processes disagree."""
        moves = [st.sampled_from(CLOCK_STEPS).map(lambda d: self.now + d)]
        if self.boundaries:
            granted = sorted(self.boundaries)
            moves.append(st.sampled_from(granted))
            moves.append(st.sampled_from(granted).map(lambda b: math.nextafter(b, -math.inf)))
        self.now = data.draw(st.one_of(moves))

    # ---------------------------------------------------------------------------- queue calls

    @rule(task=st.sampled_from(TASKS))
    def register(self, task: str) -> None:
        assert self.queue.register(task, self.now) is None
        self.model.register(task)

    @rule(worker=st.sampled_from(WORKERS), lease=st.sampled_from(LEASES))
    def claim(self, worker: str, lease: float) -> None:
        claimable = self.model.claimable(self.now)
        got = self.queue.claim(worker, self.now, lease)
        if not claimable:
            assert got is None
            return
        assert got is not None, f"nothing claimed at {self.now} though {sorted(claimable)} are claimable"
        task, generation, lease_until = got
        assert task in claimable
        if self.model.rows[task].state == "running":
            event("takeover of an expired lease" + (" at its exact boundary" if
                  self.model.rows[task].lease_until == self.now else ""))
        assert (generation, lease_until) == self.model.take(task, self.now, lease)
        self.boundaries.add(lease_until)

    @rule(
        data=st.data(),
        task=st.sampled_from(TASKS),
        which=st.sampled_from(("current", "stale", "future", "zero")),
        outcome=st.sampled_from(("done", "uncertain")),
    )
    def finish(self, data: st.DataObject, task: str, which: str, outcome: str) -> None:
        current = self.model.rows[task].generation if task in self.model.rows else 0
        generation = {
            "current": current,
            "stale": data.draw(st.integers(0, max(current - 1, 0))),
            "future": current + 1,
            "zero": 0,
        }[which]
        expected = self.model.finish(task, generation, outcome, self.now)
        got = self.queue.finish(task, generation, outcome, self.now)
        assert got is expected, (task, generation, outcome, self.now)
        if got:
            event(f"finish {outcome} accepted")
        elif which == "current" and self.model.rows.get(task, Row()).state == "running":
            event("current generation refused: lease ran out" + (" exactly" if
                  self.model.rows[task].lease_until == self.now else ""))

    # Composite moves: onto a running task's lease_until (or the float just below it), then act.
    # Reaching a boundary by separate clock moves is rare; these make it a routine case.

    def _running(self) -> list[str]:
        return sorted(t for t, r in self.model.rows.items() if r.state == "running")

    def _onto_boundary(self, data: st.DataObject, exact: bool) -> str:
        task = data.draw(st.sampled_from(self._running()))
        lease_until = self.model.rows[task].lease_until
        self.now = lease_until if exact else math.nextafter(lease_until, -math.inf)
        return task

    @precondition(lambda self: self._running())
    @rule(data=st.data(), exact=st.booleans(), worker=st.sampled_from(WORKERS), lease=st.sampled_from(LEASES))
    def claim_at_a_lease_boundary(self, data: st.DataObject, exact: bool, worker: str, lease: float) -> None:
        self._onto_boundary(data, exact)
        self.claim(worker, lease)

    @precondition(lambda self: self._running())
    @rule(data=st.data(), exact=st.booleans(), outcome=st.sampled_from(("done", "uncertain")))
    def finish_at_a_lease_boundary(self, data: st.DataObject, exact: bool, outcome: str) -> None:
        task = self._onto_boundary(data, exact)
        generation = self.model.rows[task].generation
        expected = self.model.finish(task, generation, outcome, self.now)
        assert expected is (not exact)
        assert self.queue.finish(task, generation, outcome, self.now) is expected, (task, self.now)
        event("finish at the boundary: " + ("refused (now == lease_until)" if exact else "accepted (just below)"))

    @rule()
    def reopen(self) -> None:
        """A worker exits: close the connection, open the same file again."""
        self.queue.close()
        self.queue = SQLiteLeaseQueue(self.path)

    # ------------------------------------------------------------------------------- invariant

    @invariant()
    def snapshot_matches_the_model(self) -> None:
        assert sorted(self.queue.snapshot()) == self.model.snapshot()


QueueVersusModel.TestCase.settings = settings(
    max_examples=100, stateful_step_count=40, deadline=None, print_blob=True
)
TestReferenceQueueAgainstModel = QueueVersusModel.TestCase
TestReferenceQueueAgainstModel.pytestmark = [pytest.mark.slow]  # 100 examples of up to 40 steps each
