"""95% confidence intervals for duplicate rates: the Wilson score interval, in closed form.

Why Wilson and not the normal approximation: sweep cells see zero or a handful of duplicates in a
few hundred tasks, exactly where ``p +- z*sqrt(p(1-p)/n)`` collapses to [0, 0] at zero observed and
claims a certainty the data do not have. Wilson stays inside [0, 1], gives a real upper bound at
zero (``z^2 / (n + z^2)``, close to the "rule of three" 3/n) and needs nothing but ``math``.

Why a proportion for a rate that counts extra actions: a duplicated task almost always has exactly
one extra action, so "extra actions per task" is read as the proportion of tasks with a duplicate;
the count is capped at the number of tasks so the interval stays defined when it is not.
"""

from __future__ import annotations

import math

Z95 = 1.959963984540054  # two-sided 95%: the 0.975 quantile of the standard normal


def wilson(k: float, n: float, z: float = Z95) -> tuple[float, float]:
    """(lower, upper) bounds of the proportion k/n; (0, 1) when there is no task at all."""
    if n <= 0:
        return 0.0, 1.0
    k = min(max(float(k), 0.0), float(n))
    p = k / n
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    lo = 0.0 if k == 0 else max(0.0, centre - half)
    hi = 1.0 if k == n else min(1.0, centre + half)
    return lo, hi


def tasks_needed(target: float, z: float = Z95) -> int | None:
    """The fewest tasks whose upper bound at ZERO observed is at most ``target`` (a proportion).

    Why it matters: below this many tasks a cell cannot show that any lease meets the target, so
    recommending one would be reading noise. None when no finite number can (target 0).
    """
    if target <= 0:
        return None
    if target >= 1:
        return 1
    # z^2 / (n + z^2) <= target  <=>  n >= z^2 (1 - target) / target
    return max(1, math.ceil(z * z * (1 - target) / target - 1e-9))
