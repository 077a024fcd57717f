"""What a task-time distribution predicts: P(task time > t) and its quantiles, in closed form.

Why closed form: the sweep draws the predicted probability that an attempt outlives its lease
beside the observed duplicate rate, so a reader can see whether duplicates are explained by the
tail of the work alone or by something else (faults, a queue bug). The parametrisation is the
worker's (workloads/worker.py ``draw_task_time``): ``mean`` is the mean; ``spread`` is the
uniform half-width fraction, the lognormal sigma or the pareto tail index; ``max`` caps a draw;
``empirical`` is the resampled observed durations themselves.
"""

from __future__ import annotations

import math

from takeover._internal import task_times
from takeover._internal.config import TaskTime


def survival(tt: TaskTime, t: float) -> float:
    """P(work > t) for one draw, the cap included."""
    if tt.dist == "empirical":
        return task_times.survival(tt.samples, t)
    if tt.max > 0 and t >= tt.max:
        return 0.0
    if t < 0:
        return 1.0
    mean = tt.mean
    if mean <= 0:
        return 0.0
    if tt.dist == "fixed":
        return 1.0 if mean > t else 0.0
    if tt.dist == "uniform":
        lo, hi = mean * (1 - tt.spread), mean * (1 + tt.spread)
        if hi <= lo:
            return 1.0 if mean > t else 0.0
        return min(1.0, max(0.0, (hi - t) / (hi - lo)))
    if tt.dist == "exponential":
        return math.exp(-t / mean)
    if tt.dist == "lognormal":
        sigma = tt.spread
        if t <= 0:
            return 1.0
        if sigma <= 0:
            return 1.0 if mean > t else 0.0
        mu = math.log(mean) - sigma * sigma / 2
        return 0.5 * math.erfc((math.log(t) - mu) / (sigma * math.sqrt(2)))
    alpha = tt.spread  # pareto
    xm = mean * (alpha - 1) / alpha
    return 1.0 if t <= xm else (xm / t) ** alpha


def quantile(tt: TaskTime, q: float) -> float:
    """The q-quantile of the work time (bisection on the survival function)."""
    if tt.dist == "empirical":
        return task_times.sample_quantile(tt.samples, q) if tt.samples else 0.0
    lo, hi = 0.0, max(tt.mean, 1e-6)
    while survival(tt, hi) > 1 - q and hi < 1e6:
        hi *= 2
    for _ in range(80):
        mid = (lo + hi) / 2
        if survival(tt, mid) > 1 - q:
            lo = mid
        else:
            hi = mid
    return hi


def p_outlives(tt: TaskTime, lease: float, overhead: float) -> float:
    """P(an attempt is still working when its lease ends): work + the fixed steps after it > lease."""
    return survival(tt, lease - overhead)
