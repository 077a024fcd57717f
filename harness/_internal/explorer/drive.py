"""Explore's macro step: drive one drawn task to a drawn state through the ordinary calls.

Why: some promises are about one task among several in the same state (a resolve must settle only the
task it names, not every uncertain task of that generation; a claim must take one of several expired
tasks, not all). One step at a time, two tasks reach the same state only when a long run of particular
draws lines up; a macro that registers a task, claims until that task is the one held, and finishes it
with the drawn outcome makes "several tasks uncertain (or running, or done) at once" an everyday
situation. Every call it makes is an ordinary step, judged as any other; the target state leans toward
the states other tasks are already in, which is what makes a second one common. Hypothesis shrinks the
macro as one choice, and the shrunk sequence shows its calls one by one.
"""

from __future__ import annotations

from hypothesis import strategies as st

from takeover._internal.explorer.calls import ACTORS, MachineParts, weighted
from takeover._internal.replay.model import TaskState

TARGETS = ("pending", "running", "done", "uncertain")
SAME_STATE = 3  # how much likelier a target state is when a task is in it already
MANY = 3  # tasks one drive moves at most


class DriveRules(MachineParts):
    """The drive, a rule of several calls mixed into the machine (takeover._internal.explorer.machine)."""

    def drive_step(self, data: st.DataObject) -> None:
        """Drive one task, or several, to one drawn state, one after another."""
        held = {s.state for s in self.states.values()}
        target = weighted(data, TARGETS, [SAME_STATE if t in held else 1 for t in TARGETS], "to the state")
        # Tasks that can still get there (not registered, or pending).
        movable = [k for k in self.tasks if self._state_of(k) in (None, "pending")]
        if not movable:
            return
        many = data.draw(st.integers(1, min(len(movable), MANY)), label="how many tasks")
        actor = data.draw(st.sampled_from(ACTORS), label="claimed by")
        for task in data.draw(st.permutations(movable), label="tasks to drive")[:many]:
            if not self._drive(task, target, actor):
                return

    def _drive(self, task: str, target: str, actor: str) -> bool:
        """Register ``task``, claim until it is the one held, finish it with ``target``; False when it cannot."""
        if self._state_of(task) is None:
            self._do({"step": "register", "task": task})
        if target == "pending":
            return True
        if self._state_of(task) != "pending":
            return False
        for _ in range(len(self.tasks)):  # a claim takes any claimable task: claim until it is this one
            held = len(self.holdings)
            self._do({"actor": actor, "step": "claim"})
            if len(self.holdings) == held:  # nothing claimable
                return False
            if self.holdings[-1][1] == task:
                break
        else:
            return False
        if target in ("done", "uncertain"):
            gen = self.states[task].generation
            self._do({"actor": actor, "step": "finish", "task": task, "outcome": target, "with_generation": gen})
        return True

    def _state_of(self, task: str) -> str | None:
        return self.states.get(task, TaskState()).state
