"""Promises every reference queue keeps beyond the scenarios' reach, written once for the SQLite one
(tests/unit/test_queue_reference.py) and the Redis one (tests/system/test_redis_queue.py): the order of a
claim's picks, the types its answers have, and the arguments it refuses (a ValueError naming the argument,
nothing changed).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

# (call, what the ValueError says); each is tried on a queue holding one pending task "a".
BAD_ARGUMENTS: list[tuple[Callable[[Any], object], str]] = [
    (lambda q: q.register("x", math.nan), "now must be a finite number"),
    (lambda q: q.register("", 0), "task_id must be a non-empty string"),
    (lambda q: q.register(None, 0), "task_id must be a non-empty string"),
    (lambda q: q.claim("A", math.nan, 30), "now must be a finite number"),
    (lambda q: q.claim("A", 1, math.inf), "lease must be a finite number"),
    (lambda q: q.claim("A", 1, 0), "lease must be positive"),
    (lambda q: q.claim("A", 1, -5), "lease must be positive"),
    (lambda q: q.finish("a", 1, "failed", 2), "outcome must be one of"),
    (lambda q: q.finish("a", 1, "done", math.nan), "now must be a finite number"),
]


def assert_refused_unchanged(queue: Any, call: Callable[[Any], object], message: str) -> None:
    queue.register("a", 0)
    before = queue.snapshot()
    with pytest.raises(ValueError, match=message):
        call(queue)
    assert queue.snapshot() == before


def assert_return_types(queue: Any) -> None:
    queue.register("a", 0)
    task_id, generation, lease_until = queue.claim("A", 1, 30)  # integer inputs
    assert type(task_id) is str and type(generation) is int and type(lease_until) is float
    assert type(queue.finish("a", 1, "done", 2)) is bool
    row = queue.snapshot()[0]
    assert row == ("a", "done", 1, None) and type(row[2]) is int


def assert_claim_order(queue: Any) -> None:
    """Expired leases first, oldest expiry first, then pending tasks in registration order."""
    for name in ("p1", "p2", "p3"):
        queue.register(name, 0)
    assert queue.claim("A", 0, 10)[0] == "p1"
    assert queue.claim("A", 5, 10)[0] == "p2"
    # at t=20 both leases ran out; the oldest expiry goes first, before the pending p3
    assert queue.claim("B", 20, 10)[:2] == ("p1", 2)
    assert queue.claim("B", 20, 10)[:2] == ("p2", 2)
    assert queue.claim("B", 20, 10)[:2] == ("p3", 1)
    assert queue.claim("B", 20, 10) is None
