"""Observed task durations from a file: raw samples (a CSV column, a JSON list) or a percentile summary.

Why a file of durations and not a named distribution: a team choosing a lease knows its own task times
(a log column, a metrics export, a dashboard's p50/p90/p99/max), not which parametric family they
follow, and the lease decision lives in the tail, which a fitted lognormal or Pareto gets wrong exactly
where it matters. So the durations are kept as they are and resampled: a worker draws one of them at
random (an empirical distribution), and the longest observed task stays in the draw.

Formats, all in seconds:

- a JSON list of numbers: ``[1.2, 0.8, 31.0]``;
- a JSON object of percentiles: ``{"p50": 2, "p90": 5, "p99": 40, "max": 120}`` (``min`` or ``p0``
  optional, any ``pNN`` or ``pNN.N`` accepted);
- a CSV file: one column of numbers, with or without a header; with several columns, the one named
  ``FILE:COLUMN``, or the one whose header is a duration name (``duration``, ``seconds``, ...);
  a two-column ``p50,2.0`` table (header optional) is a percentile summary.

A summary is turned into :data:`SUMMARY_POINTS` evenly spaced quantiles, interpolated piecewise
linearly in (normal score, log seconds) between the given points, so a summary is resampled like raw
samples; below the lowest point it goes on with the first segment's slope (a lognormal lower tail), and
the largest point is the given ``max`` (or the highest percentile's extrapolation when there is none).
More than :data:`MAX_SAMPLES` raw samples are thinned to that many evenly spaced order statistics,
the shortest and the longest kept, so a run's ``config.json`` stays small and the tail stays.

Every problem is a one-line :class:`UsageError` naming the file.
"""

from __future__ import annotations

import bisect
import csv
import io
import math
import re
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist
from typing import Any

from takeover._internal import store
from takeover.errors import UsageError

SUMMARY_POINTS = 1000  # quantiles a percentile summary is expanded to
MAX_SAMPLES = 10_000  # raw samples beyond this are thinned to evenly spaced order statistics
DURATION_COLUMNS = ("duration", "duration_s", "duration_seconds", "seconds", "secs", "task_time", "task_time_s",
                    "time", "time_s", "elapsed", "elapsed_s", "runtime", "runtime_s", "latency", "latency_s")
_PERCENTILE = re.compile(r"^p(\d+(?:\.\d+)?)$")


@dataclass(frozen=True)
class TaskTimes:
    """Durations in seconds, sorted; where they came from (``samples`` or ``summary``) and how many were read."""

    samples: tuple[float, ...]
    source: str
    n_read: int

    def quantile(self, q: float) -> float:
        """The q-quantile, linearly interpolated between order statistics (numpy's default)."""
        return sample_quantile(self.samples, q)

    @property
    def p50(self) -> float:
        return self.quantile(0.5)

    @property
    def p99(self) -> float:
        return self.quantile(0.99)

    @property
    def max(self) -> float:
        return self.samples[-1]

    @property
    def mean(self) -> float:
        return math.fsum(self.samples) / len(self.samples)

    def scaled(self, k: float) -> tuple[float, ...]:
        """Every duration divided by ``k`` (the time scale), rounded to the microsecond."""
        return tuple(round(s / k, 6) for s in self.samples)


def sample_quantile(samples: tuple[float, ...] | list[float], q: float) -> float:
    """The q-quantile of sorted ``samples``, linearly interpolated between order statistics."""
    if not samples:
        raise ValueError("no samples")
    pos = min(max(q, 0.0), 1.0) * (len(samples) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(samples) - 1)
    return samples[lo] + (samples[hi] - samples[lo]) * (pos - lo)


def survival(samples: tuple[float, ...], t: float) -> float:
    """The fraction of sorted ``samples`` longer than ``t``: P(a resampled task outlives t)."""
    if not samples:
        return 0.0
    return (len(samples) - bisect.bisect_right(samples, t)) / len(samples)


def split_spec(spec: str) -> tuple[Path, str | None]:
    """``FILE`` or ``FILE:COLUMN`` (a CSV column by name); a path that exists as given is never split."""
    path = Path(spec)
    if path.exists() or ":" not in spec:
        return path, None
    head, _, column = spec.rpartition(":")
    return Path(head), column or None


def load_task_times(spec: str, what: str = "task times") -> TaskTimes:
    """Read ``FILE`` or ``FILE:COLUMN`` (see the module's formats); raise :class:`UsageError` on bad input."""
    path, column = split_spec(spec)
    name = f"{what} file {str(path)!r}"
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{name} cannot be read: {exc.strerror if isinstance(exc, OSError) else exc}") from None
    return parse_task_times(text, name, column, json_like=path.suffix.lower() == ".json")


def parse_task_times(text: str, name: str, column: str | None = None, *, json_like: bool = False) -> TaskTimes:
    """The durations in ``text`` (JSON or CSV); ``name`` is how errors call the file."""
    if not text.strip():
        raise UsageError(f"{name} is empty")
    stripped = text.lstrip()
    if json_like or stripped[:1] in "[{":
        try:
            data = store.loads_json(text)
        except ValueError as exc:
            raise UsageError(f"{name} is not valid JSON: {exc}") from None
        if column is not None:
            raise UsageError(f"{name}: a column ({column!r}) is for CSV files; this one is JSON")
        if isinstance(data, dict):
            return from_summary({str(k): v for k, v in data.items()}, name)
        if isinstance(data, list):
            return from_samples([_number(v, name, f"item {i + 1}") for i, v in enumerate(data)], name)
        raise UsageError(f"{name}: expected a JSON list of durations or an object of percentiles "
                         f"(p50, p90, p99, max), got {type(data).__name__}")
    return _from_csv(text, name, column)


def _number(value: Any, name: str, where: str) -> float:
    """One duration: a finite number of seconds, not negative (a string of digits is read as a number)."""
    if isinstance(value, bool):
        raise UsageError(f"{name}: {where} is not a number: {value!r}")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"{name}: {where} is not a number: {value!r}") from None
    if not math.isfinite(x):
        raise UsageError(f"{name}: {where} is not a finite number: {value!r}")
    if x < 0:
        raise UsageError(f"{name}: {where} is negative ({value!r}); durations are seconds >= 0")
    return x


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _from_csv(text: str, name: str, column: str | None) -> TaskTimes:
    rows = [[c.strip() for c in row] for row in csv.reader(io.StringIO(text)) if any(c.strip() for c in row)]
    if not rows:
        raise UsageError(f"{name} is empty")
    header: list[str] | None = None
    if not all(_is_number(c) for c in rows[0] if c) and not _PERCENTILE.match(rows[0][0].lower()) and \
            rows[0][0].lower() not in ("max", "min"):
        header, rows = [h.lower() for h in rows[0]], rows[1:]
    if not rows:
        raise UsageError(f"{name} has a header and no durations")
    first = rows[0][0].lower()
    if column is None and len(rows[0]) == 2 and (_PERCENTILE.match(first) or first in ("max", "min")):
        return from_summary({r[0]: r[1] if len(r) > 1 else "" for r in rows}, name)
    index = 0
    if column is not None:
        if header is None or column.lower() not in header:
            raise UsageError(f"{name} has no column {column!r}" + (f" (columns: {', '.join(header)})" if header
                                                                    else " (it has no header)"))
        index = header.index(column.lower())
    elif max(len(r) for r in rows) > 1:
        named = [h for h in (header or []) if h in DURATION_COLUMNS]
        if len(named) != 1:
            cols = f" (columns: {', '.join(header)})" if header else ""
            raise UsageError(f"{name} has several columns{cols}; name the durations as FILE:COLUMN")
        index = (header or []).index(named[0])
    values = []
    for line, row in enumerate(rows, start=2 if header else 1):
        cell = row[index] if index < len(row) else ""
        values.append(_number(cell, name, f"line {line}"))
    return from_samples(values, name)


def from_samples(values: list[float], name: str) -> TaskTimes:
    """Raw durations -> sorted samples (thinned past :data:`MAX_SAMPLES`); at least one must be above 0."""
    if not values:
        raise UsageError(f"{name} holds no durations")
    values = sorted(values)
    if values[-1] <= 0:
        raise UsageError(f"{name}: every duration is 0; a lease cannot be tuned for tasks that take no time")
    if len(values) > MAX_SAMPLES:
        step = (len(values) - 1) / (MAX_SAMPLES - 1)
        kept = [values[round(i * step)] for i in range(MAX_SAMPLES)]
    else:
        kept = values
    return TaskTimes(tuple(kept), "samples", len(values))


def _level(key: str) -> float | None:
    """``p99`` -> 0.99, ``p99.9`` -> 0.999, ``max`` -> 1, ``min``/``p0`` -> 0; None for other keys."""
    key = key.strip().lower()
    if key == "max":
        return 1.0
    if key == "min":
        return 0.0
    m = _PERCENTILE.match(key)
    if not m:
        return None
    return float(m.group(1)) / 100


def from_summary(data: dict[str, Any], name: str) -> TaskTimes:
    """A percentile summary -> :data:`SUMMARY_POINTS` quantiles (see the module's docstring)."""
    points: dict[float, float] = {}
    for key, value in data.items():
        level = _level(key)
        if level is None or level > 1:
            raise UsageError(f"{name}: unknown key {key!r}; a summary takes percentiles p0..p100 (p50, p90, p99, "
                             "...), min and max")
        x = _number(value, name, key)
        if x <= 0:
            raise UsageError(f"{name}: {key} must be above 0 seconds, got {value!r}")
        points[level] = x
    if 0.5 not in points:
        raise UsageError(f"{name}: a summary needs p50 (the median)")
    if not any(level > 0.5 for level in points):
        raise UsageError(f"{name}: a summary needs at least one point above the median (p90, p99 or max): "
                         "the tail decides the lease")
    levels = sorted(points)
    for a, b in zip(levels, levels[1:], strict=False):
        if points[b] < points[a]:
            raise UsageError(f"{name}: percentiles must not decrease: {_label(a)} = {points[a]:g} s but "
                             f"{_label(b)} = {points[b]:g} s")
    n = SUMMARY_POINTS
    edge = 0.5 / n  # the first and last quantile points: min and max sit there
    norm = NormalDist()
    anchors = sorted((norm.inv_cdf(min(max(q, edge), 1 - edge)), math.log(points[q])) for q in levels)
    zs = [z for z, _ in anchors]
    samples = []
    for i in range(n):
        z = norm.inv_cdf((i + 0.5) / n)
        samples.append(math.exp(_interpolate(anchors, zs, z)))
    return TaskTimes(tuple(sorted(round(s, 6) for s in samples)), "summary", len(points))


def _interpolate(anchors: list[tuple[float, float]], zs: list[float], z: float) -> float:
    """Piecewise linear through ``anchors``; beyond them, the nearest segment's slope (flat for one anchor)."""
    if len(anchors) == 1:
        return anchors[0][1]
    j = bisect.bisect_right(zs, z)
    j = min(max(j, 1), len(anchors) - 1)
    (z0, y0), (z1, y1) = anchors[j - 1], anchors[j]
    if z1 == z0:
        return y1 if z >= z1 else y0
    return y0 + (y1 - y0) * (z - z0) / (z1 - z0)


def _label(level: float) -> str:
    return "max" if level == 1 else "min" if level == 0 else f"p{100 * level:g}"
