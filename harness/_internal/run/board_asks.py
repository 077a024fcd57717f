"""What the nemesis asks of one slot's worker through the board, and what the worker shows back.

Why apart from the phases: these are one-writer-each mailboxes between the nemesis and a single worker
(a heartbeat or a lost reply asked, clock jumps posted, the finish and extend calls the worker counts),
read by the aimed faults (takeover._internal.run.stale_heartbeat, duplicate_register, takeover._internal.run.clock); the
phases are what every worker publishes about itself. The offsets come from takeover._internal.run.board_layout.
"""

from __future__ import annotations

from takeover._internal.run.board_layout import BEAT_ASK, CLOCK_JUMPS, EXTEND_CALLS, FINISH_CALLS, LOSE_ASK, BoardMemory


class AsksBoard(BoardMemory):
    """A slot's asks and answers between the nemesis and the slot's worker."""

    def finish_calls(self, slot: int) -> int:
        return int(self.array[self._base(slot) + FINISH_CALLS])

    def ask_heartbeat(self, slot: int) -> None:
        """The nemesis: ask the slot's (frozen) worker to call extend() once at its next step."""
        self.array[self._base(slot) + BEAT_ASK] = 1.0

    def heartbeat_asked(self, slot: int) -> bool:
        """The slot's worker: whether a heartbeat is asked of it; the asking is taken back at once
        (only the worker writes the field to 0, only a frozen worker's is set to 1)."""
        return self._take(slot, BEAT_ASK)

    def ask_lost_reply(self, slot: int) -> None:
        """The nemesis: the slot's worker is to lose the reply of its next action."""
        self.array[self._base(slot) + LOSE_ASK] = 1.0

    def lost_reply_asked(self, slot: int) -> bool:
        """The slot's worker: whether its next action is to lose its reply; the asking is taken back."""
        return self._take(slot, LOSE_ASK)

    def withdraw_heartbeat(self, slot: int) -> None:
        """The nemesis: a heartbeat asked and not taken is no longer asked (the window ended)."""
        self.array[self._base(slot) + BEAT_ASK] = 0.0

    def extend_calls(self, slot: int) -> int:
        return int(self.array[self._base(slot) + EXTEND_CALLS])

    def post_clock_jump(self, slot: int, seconds: float) -> None:
        """Step the slot's worker clock by ``seconds`` (the nemesis only: one writer, so no lost update)."""
        self.array[self._base(slot) + CLOCK_JUMPS] += seconds

    def clock_jumps(self, slot: int) -> float:
        """Every jump posted to the slot so far, summed; a worker takes the difference to what it applied."""
        return float(self.array[self._base(slot) + CLOCK_JUMPS])

    def _take(self, slot: int, ask: int) -> bool:
        """The worker's side of an ask: whether it is set, clearing it if so (the worker alone clears it)."""
        i = self._base(slot) + ask
        if self.array[i] == 0.0:
            return False
        self.array[i] = 0.0
        return True
