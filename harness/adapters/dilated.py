"""A library's clock, dilated: the harness's ``now`` run faster, so that its lease is the library's own setting.

Why: RQ's shortest lease is 60 s and SAQ's settings are whole seconds, while takeover's faults last a second
or two. So each adapter shows its library the harness's clock run ``library_lease / lease`` times as fast,
from a fixed epoch at the run's first call, and every duration the library compares is stretched alike
(docs/analyses/rq.md and saq.md, "the clock"). The origin and the scale are stored in Redis, so every
process of a run reads one clock. The library reads it through a function its modules imported by name
(``rq.utils.now``, ``saq.utils.now``): :func:`swapped` replaces it in each of them for one call.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import cast

import redis


class DilatedClock:
    """The library's seconds for the harness's ``now``, and back (``key``: the Redis hash of the run's
    origin, the harness's first ``now``, and scale, library-seconds per harness-second)."""

    def __init__(self, conn: redis.Redis, key: str, epoch: float, library_lease: float) -> None:
        self.conn = conn
        self.key = key
        self.epoch = epoch
        self.library_lease = library_lease
        self.origin: float | None = None
        self.scale: float | None = None

    def load(self, now: float, lease: float | None) -> None:
        """The run's origin (the first caller's ``now``) and, from the first claim's lease on, its scale."""
        if self.origin is None:
            self.conn.hsetnx(self.key, "origin", repr(now))
        if self.scale is None and lease is not None:
            self.conn.hsetnx(self.key, "scale", repr(self.library_lease / lease))
        self._read()

    def _read(self) -> None:
        stored = cast(dict[bytes, bytes], self.conn.hgetall(self.key))
        self.origin = float(stored[b"origin"])
        if b"scale" in stored:
            self.scale = float(stored[b"scale"])

    def library_seconds(self, now: float) -> float:
        assert self.origin is not None
        return self.epoch + (now - self.origin) * (self.scale or 1.0)

    def harness_time(self, library_seconds: float) -> float:
        """A library timestamp (a registry score, a job's start) on the harness's clock."""
        if self.origin is None or self.scale is None:
            self._read()  # a library time exists only after the run's first call stored the origin
        assert self.origin is not None
        return self.origin + (library_seconds - self.epoch) / (self.scale or 1.0)


@contextmanager
def swapped(package: str, name: str, real: object, fake: object) -> Iterator[None]:
    """While the block runs, every module of ``package`` whose ``name`` is ``real`` (imported by name) has
    ``fake`` instead. Per process, one thread: as every adapter's clock (docs/adapters.md)."""
    modules = [
        m
        for module_name, m in list(sys.modules.items())
        if (module_name == package or module_name.startswith(package + ".")) and getattr(m, name, None) is real
    ]
    for module in modules:
        setattr(module, name, fake)
    try:
        yield
    finally:
        for module in modules:
            setattr(module, name, real)
