"""A real run that must show an event, retried with the next seed a bounded number of times.

Why: a run's faults are seeded, but what they meet is not. On a loaded machine the workers may
barely move in a few seconds of faults, so the one event a test is about (a stolen live lease, a
lost reply that left an uncertain task, a kill inside finish) now and then does not happen at all.
Retrying with the next seed keeps every assertion: the test reads the first run that showed the
event, or, when none of ``attempts`` did, the last one, so its own assertions fail with their own
messages, as they would if the behaviour that makes the event were broken.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

ATTEMPTS = 3


def until_shown(run: Callable[[int], T], missing: Callable[[T], str | None], attempts: int = ATTEMPTS) -> T:
    """``run(i)`` for i = 0, 1, ... (the caller adds i to its seed) until ``missing`` of its result is
    None; each miss is said on stderr (pytest shows it with a failure), with what was missing."""
    result = run(0)
    for i in range(1, attempts):
        why = missing(result)
        if why is None:
            break
        print(f"attempt {i} of {attempts} showed no {why}: running again with the next seed", file=sys.stderr)
        result = run(i)
    return result
