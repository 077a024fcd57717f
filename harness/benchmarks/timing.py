"""Trustworthy timing for ratios: warm-ups, interleaved repetitions, medians.

Why interleave: on a shared 2-core machine the background load drifts over seconds. Running the
candidate and its baseline in alternation (A B A B ...) exposes both to the same drift, so their
ratio is far steadier than either absolute figure.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Sample:
    """Rates (operations per second) of repeated runs; the median is the figure reported."""

    rates: tuple[float, ...] = field(default_factory=tuple)

    @property
    def median(self) -> float:
        return statistics.median(self.rates) if self.rates else float("nan")

    @property
    def spread(self) -> float:
        """(max - min) / median: how much to trust the median."""
        if len(self.rates) < 2 or not self.median:
            return 0.0
        return (max(self.rates) - min(self.rates)) / self.median


Prepared = Callable[[], Callable[[], int]]


def ratio_figures(ratio: str, cand: Sample, base: Sample, cand_rate: str, base_rate: str) -> dict[str, float]:
    """What a measurement reports: the ratio of the medians, both medians, and the larger spread."""
    return {ratio: cand.median / base.median, cand_rate: cand.median, base_rate: base.median,
            f"{ratio}_spread": max(cand.spread, base.spread)}


def rate(prepare: Prepared) -> float:
    """Prepare untimed (fresh files, connections), then time one run; operations per second."""
    fn = prepare()
    start = time.perf_counter()
    ops = fn()
    elapsed = time.perf_counter() - start
    return ops / elapsed if elapsed > 0 else float("inf")


def compare(
    candidate: Prepared,
    baseline: Prepared,
    *,
    repetitions: int = 5,
    warmups: int = 1,
) -> tuple[Sample, Sample]:
    """Interleaved A/B measurement of two workloads; returns (candidate, baseline) samples.

    Each workload is a ``prepare`` function that does its untimed set-up and returns the timed
    closure, which returns the number of operations it performed.
    """
    for _ in range(warmups):
        rate(baseline)
        rate(candidate)
    cand: list[float] = []
    base: list[float] = []
    for i in range(repetitions):
        # Alternate which goes first so neither always runs on a warmer cache.
        if i % 2 == 0:
            base.append(rate(baseline))
            cand.append(rate(candidate))
        else:
            cand.append(rate(candidate))
            base.append(rate(baseline))
    return Sample(tuple(cand)), Sample(tuple(base))
