"""The phase board's fields: no two share a double, and every offset follows from the one declaration
(takeover._internal.run.board_layout). A field added by hand at an index already taken fails here, not in a run
where two faults would silently write one double."""

from __future__ import annotations

import multiprocessing

import pytest

from takeover._internal.run import board_layout
from takeover._internal.run.board_layout import HEADER, HEADER_LAYOUT, SLOT_LAYOUT, SLOT_WIDTH, Layout
from takeover._internal.run.phases import COUNTERS, PhaseBoard


def _offsets(prefix_header: bool) -> dict[str, int]:
    """The module's offset constants: the header's (H_...) or a slot's (the other upper-case ints)."""
    names = [n for n in dir(board_layout) if n.isupper() and isinstance(getattr(board_layout, n), int)]
    names = [n for n in names if n not in ("HEADER", "SLOT_WIDTH")]
    return {n: getattr(board_layout, n) for n in names if n.startswith("H_") == prefix_header}


@pytest.mark.parametrize(("prefix_header", "width"), [(True, HEADER), (False, SLOT_WIDTH)])
def test_no_two_fields_of_a_record_share_a_double(prefix_header: bool, width: int) -> None:
    offsets = _offsets(prefix_header)
    taken: dict[int, str] = {}
    for name, offset in sorted(offsets.items()):
        assert 0 <= offset < width, f"{name} at {offset} lies outside its record of {width}"
        assert offset not in taken, f"{name} and {taken[offset]} share offset {offset}"
        taken[offset] = name
    assert sorted(taken) == list(range(width)), "every declared field has its constant"


def test_the_constants_are_the_declarations_offsets() -> None:
    for layout, prefix in ((HEADER_LAYOUT, "H_"), (SLOT_LAYOUT, "")):
        for name in layout.names:
            assert getattr(board_layout, prefix + name.upper()) == layout.at(name), name


def test_a_field_declared_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="declared twice: race"):
        Layout(("seq", "race", "phase", "race"))


def test_the_layout_is_the_one_the_board_has_always_had() -> None:
    """The order is part of the board's behaviour only within one run, but a reordering is a change worth
    seeing: this pins the offsets the hand-laid board had."""
    assert (HEADER, SLOT_WIDTH) == (9, 29)
    assert (board_layout.H_STOP, board_layout.H_GATE, board_layout.H_STARTED) == (0, 2, 8)
    assert (board_layout.SEQ, board_layout.DONE, board_layout.RACE, board_layout.LOSE_ASK) == (0, 8, 15, 28)


def test_slots_do_not_overlap_in_the_shared_array() -> None:
    """Writing every field of every slot through the board lands each value on its own double."""
    board = PhaseBoard.create(multiprocessing.get_context("spawn"), 3)
    assert len(board.array) == HEADER + 3 * SLOT_WIDTH
    for slot in range(3):
        for offset in range(SLOT_WIDTH):
            board.set_field(slot, offset, 1000.0 * (slot + 1) + offset)
    assert list(board.array[:HEADER]) == [0.0] * HEADER, "no slot field lands in the header"
    for slot in range(3):
        assert [board.field(slot, o) for o in range(SLOT_WIDTH)] == [1000.0 * (slot + 1) + o for o in range(SLOT_WIDTH)]
    assert board.total(COUNTERS["done"]) == sum(1000.0 * (s + 1) + board_layout.DONE for s in range(3))
