"""Where each field of the phase board lives: every offset derived from one declaration.

Why one declaration: the board is one flat ``RawArray('d')`` shared by the coordinator, the nemesis and
every worker process, and a field is only an index into it. Hand-laid indices let a new field land on
an old one's double without a word (two faults writing one slot field, or a header field over slot 0).
Here each record (the header, a slot) is a tuple of names in order, one double each: its offsets and
its width follow from it, a name cannot be declared twice (:class:`Layout` refuses), and
tests/unit/test_board_layout.py checks that no two fields of a record share a double.

The order below is the layout the board has always had; appending a field moves nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from takeover._internal.run.wake import WakeWord


@dataclass(frozen=True)
class Layout:
    """A record of doubles: ``names`` in order, each one double wide, the first at offset 0."""

    names: tuple[str, ...]
    offsets: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        twice = sorted({name for name in self.names if self.names.count(name) > 1})
        if twice:
            raise ValueError(f"board fields declared twice: {', '.join(twice)}")
        object.__setattr__(self, "offsets", {name: i for i, name in enumerate(self.names)})

    @property
    def width(self) -> int:
        """How many doubles one record takes."""
        return len(self.names)

    def at(self, name: str) -> int:
        """The offset of field ``name`` within the record."""
        return self.offsets[name]


# The header, before the slots: what the coordinator and the nemesis tell every worker at once.
# stop: stop all workers; faults: worker-drawn faults enabled; gate: the claim gate, 0 when open, else the
# number of the hold that closed it; register_hold, register_task: a registration asked of the workers
# that a hold kept back (the hold's number, the task's index); race_hold, race_workers, race_until: a race
# asked of the workers a hold lets go (takeover._internal.run.board_gate): the hold's number, how many it lets go,
# until when they wait for each other; started: the run has started (workers that opened the queue wait
# for it before their first claim).
HEADER_LAYOUT = Layout(
    (
        "stop",
        "faults",
        "gate",
        "register_hold",
        "register_task",
        "race_hold",
        "race_workers",
        "race_until",
        "started",
    )
)

# One worker slot. seq..since: the phase the slot's worker publishes (seq is odd while it writes).
# done..slowed: counters summed over every incarnation of the slot (progress display, fallback summary).
# open_faults: the faults the worker recorded (invoke ... ok) and has not closed yet, as bits: when the
# worker dies in between, the coordinator closes them with ``info`` (docs/history.md).
# finish_calls: finish calls this incarnation has started (counted after the invoke is written, before the
# call): an aimed fault that resumed a frozen holder sees from it that the holder's finish went out.
# clock_jumps: the clock jumps the nemesis posted to the incarnation, summed (seconds; takeover._internal.run.clock):
# the worker applies what was added since it last looked, so two jumps between two looks are one step.
# race..race_with: a race at the gate (takeover._internal.run.board_gate): the hold the worker lines up for while it
# waits for a partner, its negative once it has left for the claim; the time it last looked while waiting
# (the instant it left, once it has); the core it waits on (-1: unknown); its place among the racers the
# nemesis let go; the racer it offers itself to, by the board index of that slot (0: none).
# freeze_arm..freeze_of: a freeze inside a queue call (takeover._internal.run.freeze_in_call): the nemesis arms it
# (freeze_arm: the request's number, 0 for none; freeze_op: the call, by its index in CALL_OPS;
# freeze_spot: in [0, 1), which of the call's statements), the worker answers in freeze_seen (the
# request's number once it stops itself, its negative when the call passed without a point to stop at)
# and says where (freeze_at: the statement, freeze_of: how many the call issues).
# beat_ask, extend_calls: a heartbeat asked of the slot's frozen worker (takeover._internal.run.stale_heartbeat),
# and the extends this incarnation has seen return. lose_ask: a lost reply asked of the slot's worker
# (duplicate_register): its next action loses its reply.
SLOT_LAYOUT = Layout(
    (
        "seq",
        "phase",
        "task",
        "gen",
        "lease_until",
        "process",
        "pid",
        "since",
        "done",
        "actions",
        "lost",
        "slowed",
        "open_faults",
        "finish_calls",
        "clock_jumps",
        "race",
        "race_beat",
        "race_core",
        "race_rank",
        "race_with",
        "freeze_arm",
        "freeze_op",
        "freeze_spot",
        "freeze_seen",
        "freeze_at",
        "freeze_of",
        "beat_ask",
        "extend_calls",
        "lose_ask",
    )
)

HEADER = HEADER_LAYOUT.width
SLOT_WIDTH = SLOT_LAYOUT.width

_h, _s = HEADER_LAYOUT.at, SLOT_LAYOUT.at
H_STOP, H_FAULTS, H_GATE = _h("stop"), _h("faults"), _h("gate")
H_REGISTER_HOLD, H_REGISTER_TASK = _h("register_hold"), _h("register_task")
H_RACE_HOLD, H_RACE_WORKERS, H_RACE_UNTIL = _h("race_hold"), _h("race_workers"), _h("race_until")
H_STARTED = _h("started")

SEQ, PHASE, TASK, GEN = _s("seq"), _s("phase"), _s("task"), _s("gen")
LEASE_UNTIL, PROCESS, PID, SINCE = _s("lease_until"), _s("process"), _s("pid"), _s("since")
DONE, ACTIONS, LOST, SLOWED = _s("done"), _s("actions"), _s("lost"), _s("slowed")
OPEN_FAULTS, FINISH_CALLS, CLOCK_JUMPS = _s("open_faults"), _s("finish_calls"), _s("clock_jumps")
RACE, RACE_BEAT, RACE_CORE = _s("race"), _s("race_beat"), _s("race_core")
RACE_RANK, RACE_WITH = _s("race_rank"), _s("race_with")
FREEZE_ARM, FREEZE_OP, FREEZE_SPOT = _s("freeze_arm"), _s("freeze_op"), _s("freeze_spot")
FREEZE_SEEN, FREEZE_AT, FREEZE_OF = _s("freeze_seen"), _s("freeze_at"), _s("freeze_of")
BEAT_ASK, EXTEND_CALLS, LOSE_ASK = _s("beat_ask"), _s("extend_calls"), _s("lose_ask")


class BoardMemory:
    """The board's shared array, its number of slots and the word held workers sleep on; pickled
    into each spawned worker. What the fields mean lives with the parts that read and write them
    (takeover._internal.run.phases, takeover._internal.run.board_gate, takeover._internal.run.board_asks)."""

    def __init__(self, array: Any, slots: int, wake: WakeWord) -> None:
        self.array = array
        self.slots = slots
        self.wake = wake  # what held workers sleep on until their hold ends

    def __getstate__(self) -> dict[str, Any]:
        return {"array": self.array, "slots": self.slots, "wake": self.wake}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.array = state["array"]
        self.slots = state["slots"]
        self.wake = state["wake"]

    def _base(self, slot: int) -> int:
        return HEADER + slot * SLOT_WIDTH

    def slot_index(self, slot: int, index: int) -> int:
        """Where one of a slot's fields lives in :attr:`array` (for a reader on a hot path)."""
        return self._base(slot) + index

    def field(self, slot: int, index: int) -> float:
        """One of a slot's fields by its index (FREEZE_ARM ...), for the faults that keep their own fields."""
        return float(self.array[self._base(slot) + index])

    def set_field(self, slot: int, index: int, value: float) -> None:
        self.array[self._base(slot) + index] = value
