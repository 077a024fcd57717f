"""The search: the shortest lease (or the longest heartbeat fraction) shown under the target, in few runs.

Why a search and not a grid: most cells of a grid sit far from the target, where one run already
decides them, and the runs that matter are the few near it. Here the candidate values are a ladder
ordered so that the duplicate rate does not rise along it (longer leases; or smaller heartbeat
fractions). Each point keeps the pooled count of its runs (k lease-caused duplicates in n tasks) and
is judged by the 95 % Wilson interval the sweep uses (:func:`takeover._internal.sweep.wilson.wilson`):

- **under**: the upper bound is at most the target: the point is shown good;
- **over**: the lower bound is above the target: shown bad;
- **open**: neither yet: the next run goes here (sequential testing: runs are spent where the bound is
  still undecided);
- **capped**: still open after ``cap`` tasks: the rate sits so close to the target that no affordable
  run count decides it, so it counts as "not shown under" (the conservative side).

The answer (:meth:`Search.best`) is the first point shown under such that every tried point after it
is under too: the sweep's closure rule (a longer lease can only lose fewer tasks, so a good point
followed by a bad one is noise). Between the last point not shown under and the answer the search
bisects; it is **resolved** when the two are neighbours on the ladder (or the answer is the ladder's
first point), so the answer is known to the ladder's resolution. It knows nothing of runs: a fake
outcome oracle drives it in the unit tests, real runs in :mod:`takeover._internal.tune.driver`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from takeover._internal.sweep.wilson import wilson

UNDER, OVER, OPEN, CAPPED, UNTRIED = "under", "over", "open", "capped", "untried"

# Round numbers, about 20-25 % apart: a recommendation reads "lease 50 s", not "lease 47.3 s", and
# neighbours on this ladder are the search's resolution.
NICE = (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0)


def nice_ladder(lo: float, hi: float) -> list[float]:
    """The round values from the largest one at or below ``lo`` to the smallest one at or above ``hi``."""
    if not (0 < lo <= hi) or not math.isfinite(hi):
        raise ValueError(f"a ladder needs 0 < lo <= hi, got {lo}, {hi}")
    exp = math.floor(math.log10(lo)) - 1
    values: list[float] = []
    while not values or values[-1] < hi:
        for m in NICE:
            v = float(f"{m * 10.0 ** exp:.6g}")
            if v <= lo:
                values = [v]  # the largest round value at or below lo starts the ladder
            elif v < hi or not values or values[-1] < hi:
                values.append(v)
        exp += 1
    return values


@dataclass
class Point:
    """One value's pooled evidence: lease-caused duplicates ``k`` in ``n`` tasks over ``runs`` runs."""

    k: int = 0
    n: int = 0
    runs: int = 0

    def bounds(self) -> tuple[float, float]:
        return wilson(self.k, self.n)


@dataclass
class Search:
    """Bisection over ``values`` (the rate does not rise along them) for the first one shown under ``target``.

    ``target`` is a proportion (20 per 1000 is 0.02); ``cap`` the tasks after which an undecided point is
    given up; ``start`` the index of the first run (a model's guess of the answer saves runs).
    """

    values: list[float]
    target: float
    cap: int
    start: int = 0
    points: dict[int, Point] = field(default_factory=dict)
    _climbs: int = 0

    def record(self, index: int, k: int, n: int) -> None:
        p = self.points.setdefault(index, Point())
        p.k, p.n, p.runs = p.k + int(k), p.n + int(n), p.runs + 1

    def state(self, index: int) -> str:
        p = self.points.get(index)
        if p is None or p.n == 0:
            return UNTRIED
        lo, hi = p.bounds()
        if hi <= self.target:
            return UNDER
        if lo > self.target:
            return OVER
        return CAPPED if p.n >= self.cap else OPEN

    def tried(self) -> list[int]:
        return sorted(i for i, p in self.points.items() if p.n)

    def best(self) -> int | None:
        """The answer so far: the first tried point shown under with every tried point after it under."""
        found = None
        for i in reversed(self.tried()):
            if self.state(i) != UNDER:
                break
            found = i
        return found

    def below(self) -> int:
        """The last tried point before the answer that is not shown under (-1: none, the ladder's start)."""
        b = self.best()
        limit = len(self.values) if b is None else b
        bad = [i for i in self.tried() if i < limit and self.state(i) in (OVER, CAPPED)]
        return max(bad, default=-1)

    def resolved(self) -> bool:
        """An answer, and no untried or undecided value left between it and the last point not shown under."""
        b = self.best()
        return b is not None and b - self.below() <= 1 and not self._open_between(self.below(), b)

    def _open_between(self, lo: int, hi: int) -> list[int]:
        return [i for i in self.tried() if lo < i < hi and self.state(i) == OPEN]

    def next(self) -> int | None:
        """Where the next run goes; None when resolved or when the ladder has nothing left to try."""
        b = self.best()
        if b is None:
            tried = self.tried()
            if not tried:
                return self.start
            top = tried[-1]
            if self.state(top) == OPEN:  # undecided: more evidence, here
                return top
            if top == len(self.values) - 1:
                return None  # not shown under even at the longest value: nothing left to try
            self._climbs += 1  # not shown under: climb, faster each time (1, 2, 4 steps)
            return min(len(self.values) - 1, top + 2 ** (self._climbs - 1))
        lo = self.below()
        undecided = self._open_between(lo, b)
        if undecided:
            return undecided[-1]
        if b - lo <= 1:
            return None
        return (lo + b) // 2

    def answer(self) -> float | None:
        b = self.best()
        return None if b is None else self.values[b]
