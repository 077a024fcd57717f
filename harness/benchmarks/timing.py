"""Trustworthy timing for ratios: short alternating turns, the median of their ratios, and its spread.

Why turns: on a shared 2-core machine the background load drifts over seconds. Timing a candidate for a
whole repetition and then its baseline lets a change of load land in the ratio (``takeover bench
--only queue_vs_raw`` three times in a row gave 0.756, 0.942 and 0.959). Here the two take short turns (A B
B A A B ..., the order flipped every round), each round's ratio comes from two turns a fraction of a
second apart, which see the same machine, and the figure is the median of the rounds' ratios. Its spread
(the interquartile range and min-max of those ratios) says whether the figure can judge a target at all:
:func:`verdict` gives PASS or MISS only when the whole interquartile range is on one side of it, "noisy"
otherwise. The 1-minute load average is sampled at every round, so a figure says under what load it was
measured, and the CPU other processes used meanwhile is measured beside it (the bench lifts the load
average itself; :mod:`takeover.benchmarks.others_cpu`), so a figure says whether it was a quiet one.

Why a turn may be timed by the process's CPU time (``clock=CPU``): a one-process loop on SQLite spends a
quarter to a third of its wall time off the CPU, in the fsyncs of the WAL's checkpoints, whose latency
is the shared disk's, and on a loaded machine more in waiting for a core. Both sides of the ratio pay them
alike, so they add nothing to the ratio but noise (and pull it towards 1). Timed by CPU time, the rounds'
ratios of ``queue_vs_raw`` spread half as much (bootstrap standard error of the median 0.005-0.011
against 0.011-0.031 from the same turns, load 3-6). The wall-clock ratio of the same rounds is kept
beside it (``<figure>_wall``).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from takeover.benchmarks.others_cpu import OthersCpu

PASS, MISS, NOISY = "PASS", "MISS", "noisy"
WALL, CPU = "wall", "cpu"  # what a turn is timed by: the wall clock, or this process's CPU time (user + system)


@dataclass(frozen=True)
class Sample:
    """Rates (operations per second) of repeated turns; the median is the figure reported."""

    rates: tuple[float, ...] = field(default_factory=tuple)

    @property
    def median(self) -> float:
        return statistics.median(self.rates) if self.rates else float("nan")

    @property
    def spread(self) -> float:
        """(max - min) / median: how much the rates themselves moved."""
        if len(self.rates) < 2 or not self.median:
            return 0.0
        return (max(self.rates) - min(self.rates)) / self.median


def quartiles(values: Sequence[float]) -> tuple[float, float]:
    """The first and third quartiles (inclusive method: with one value both are it, with two the
    interpolations between them), so a figure of a single round has an IQR of zero width."""
    if not values:
        return float("nan"), float("nan")
    if len(values) == 1:
        return float(values[0]), float(values[0])
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]


@dataclass(frozen=True)
class Spread:
    """A figure from repeated rounds: the median of the rounds' values, their IQR and min-max."""

    values: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.values) if self.values else float("nan")

    @property
    def iqr(self) -> tuple[float, float]:
        return quartiles(self.values)

    @property
    def range(self) -> tuple[float, float]:
        return (min(self.values), max(self.values)) if self.values else (float("nan"), float("nan"))

    def keys(self, name: str, digits: int = 3) -> dict[str, Any]:
        """bench.json's keys for the figure ``name`` beside its value: ``<name>_iqr`` [q1, q3], ``<name>_range``
        [min, max] and ``<name>_rounds`` (how many ratios the median is of)."""
        return {
            f"{name}_iqr": [round(x, digits) for x in self.iqr],
            f"{name}_range": [round(x, digits) for x in self.range],
            f"{name}_rounds": len(self.values),
        }


def verdict(op: str, bound: float, iqr: Sequence[float]) -> str:
    """PASS when the whole interquartile range meets ``op bound`` (">=" or "<="), MISS when the whole of it
    misses, "noisy" when the target falls inside it: that figure cannot say which."""
    lo, hi = min(iqr), max(iqr)
    if op == ">=":
        return PASS if lo >= bound else MISS if hi < bound else NOISY
    return PASS if hi <= bound else MISS if lo > bound else NOISY


class Load:
    """The 1-minute load average sampled during a measurement (at its start, at every round, at its end),
    and the CPU the machine spent outside the bench meanwhile (:mod:`takeover.benchmarks.others_cpu`)."""

    def __init__(self) -> None:
        self.when = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        self.samples: list[float] = []
        self.sample()
        self.others = OthersCpu()

    def sample(self) -> None:
        self.samples.append(os.getloadavg()[0])

    def figures(self) -> dict[str, Any]:
        """``when`` the measurement started, ``load_avg``: the 1-minute load's min, median and max, and ``cpu``:
        the cores other processes and the bench used meanwhile, and whether that was quiet."""
        self.sample()
        s = self.samples
        return {"when": self.when, "load_avg": {"min": round(min(s), 2), "median": round(statistics.median(s), 2),
                                                "max": round(max(s), 2)}, **self.others.figures()}  # fmt: skip


@dataclass(frozen=True)
class Timed:
    """What a turn returns when it timed itself (a child process, a run's steady window): its rate."""

    rate: float


Turn = Callable[[], "int | Timed"]  # one turn: the operations it made (the runner times it), or its own Timed


def _per(done: int, elapsed: float) -> float:
    return done / elapsed if elapsed > 0 else float("inf")


def _timed(turn: Turn) -> tuple[float, float]:
    """The turn's rate by the wall clock and by this process's CPU time (a turn that timed itself: its own
    rate, twice)."""
    start, cpu = time.perf_counter(), time.process_time()
    done = turn()
    cpu, elapsed = time.process_time() - cpu, time.perf_counter() - start
    if isinstance(done, Timed):
        return done.rate, done.rate
    return _per(done, elapsed), _per(done, cpu)


@dataclass
class Turns:
    """Rates of a candidate and its baseline in alternating turns, a ratio per round, and the load meanwhile.

    :meth:`run` adds rounds; several calls (one per repetition, each on fresh databases) add to the same
    figures. Each round runs both once, the order flipped from one round to the next, so neither always
    runs first (on a warmer cache, or on the machine the other just left). ``clock`` is what the figure's
    rates are of: WALL, or CPU (this process's CPU time, for turns that run in it alone); the wall-clock
    rates are kept either way."""

    clock: str = WALL
    cand: list[float] = field(default_factory=list)
    base: list[float] = field(default_factory=list)
    cand_wall: list[float] = field(default_factory=list)
    base_wall: list[float] = field(default_factory=list)
    load: Load = field(default_factory=Load)

    def run(self, candidate: Turn, baseline: Turn, rounds: int, *, warmups: int = 1) -> Turns:
        for _ in range(warmups):  # untimed: connections made, statements prepared, caches warm
            candidate()
            baseline()
        for _ in range(rounds):
            first_base = len(self.cand) % 2 == 0
            if first_base:
                b = _timed(baseline)
                c = _timed(candidate)
            else:
                c = _timed(candidate)
                b = _timed(baseline)
            by = 1 if self.clock == CPU else 0
            self.cand.append(c[by])
            self.base.append(b[by])
            self.cand_wall.append(c[0])
            self.base_wall.append(b[0])
            self.load.sample()
        return self

    @property
    def ratios(self) -> Spread:
        """Candidate over baseline, round by round (rates: above 1, the candidate is the faster), by ``clock``."""
        return _ratios(self.cand, self.base)

    def figures(self, ratio: str, cand_rate: str, base_rate: str, *, inverse: bool = False) -> dict[str, Any]:
        """bench.json's figures: ``ratio`` (the median of the rounds' ratios; baseline over candidate with
        ``inverse``, for a ratio of times), the median rates, ``<ratio>_spread`` (the larger relative
        max-min of the two rates), the ratio's IQR, range and rounds, ``when`` and ``load_avg``.

        ``cand_rate`` and ``base_rate`` are wall-clock rates whatever the clock; with CPU, also
        ``<ratio>_clock`` ("cpu"), ``<ratio>_wall`` (the median of the same rounds' wall-clock ratios) and the
        rates per CPU-second (``..._per_cpu_s`` for ``..._per_s``)."""
        spread = self.ratios
        if inverse:
            spread = Spread(tuple(1 / r for r in spread.values))
        cand, base = Sample(tuple(self.cand)), Sample(tuple(self.base))
        wall_cand, wall_base = Sample(tuple(self.cand_wall)), Sample(tuple(self.base_wall))
        out = {ratio: spread.median, cand_rate: wall_cand.median, base_rate: wall_base.median,
               f"{ratio}_spread": max(cand.spread, base.spread), **spread.keys(ratio)}  # fmt: skip
        if self.clock == CPU:
            wall = _ratios(self.cand_wall, self.base_wall)
            if inverse:
                wall = Spread(tuple(1 / r for r in wall.values))
            out |= {f"{ratio}_clock": CPU, f"{ratio}_wall": wall.median,
                    _per_cpu(cand_rate): cand.median, _per_cpu(base_rate): base.median}  # fmt: skip
        return out | self.load.figures()


def _ratios(cand: Sequence[float], base: Sequence[float]) -> Spread:
    return Spread(tuple(c / b for c, b in zip(cand, base, strict=True) if b > 0))


def _per_cpu(key: str) -> str:
    """``queue_pairs_per_s`` -> ``queue_pairs_per_cpu_s``."""
    return key.removesuffix("_per_s") + "_per_cpu_s"


def rate(prepare: Callable[[], Callable[[], int]]) -> float:
    """Prepare untimed (fresh files, connections), then time one run; operations per wall-clock second."""
    return _timed(prepare())[0]
