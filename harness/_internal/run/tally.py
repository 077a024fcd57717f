"""What a run's faults did, counted: the nemesis' tally and the aimed faults' within it.

Why a module of its own: the live progress line (takeover._internal.run.progress) and the run's own summary
read these counts, and must load without the nemesis, the aimed faults and the supervisor that fill
them in (pyproject.toml: the progress model does not import the coordinator).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class AimTally:
    """The aimed faults' windows: hit, missed (and why), or not tried."""

    hits: Counter = field(default_factory=Counter)  # by kind
    missed: Counter = field(default_factory=Counter)  # by kind
    reasons: Counter = field(default_factory=Counter)  # (kind, reason)
    skipped: Counter = field(default_factory=Counter)  # by kind: arrivals not tried, the queue giving it nothing


@dataclass
class Tally:
    """What was injected, for progress and for the summary when no checker is installed."""

    kills: Counter = field(default_factory=Counter)  # by aim
    kill_hits: Counter = field(default_factory=Counter)  # by aim: the phase at death matched
    kill_phases: Counter = field(default_factory=Counter)  # (aim, phase at death)
    pauses: Counter = field(default_factory=Counter)  # by class
    hunts_expired: Counter = field(default_factory=Counter)  # by kind
    probe_misses: Counter = field(default_factory=Counter)  # by kind: frozen, but it had moved on
    aimed: AimTally = field(default_factory=AimTally)  # aimed faults: windows hit and missed
    clock_jumps: int = 0  # clock jumps posted to a live worker (each applied by it when it next reads its clock)
