"""Faults steered by model coverage: pick the fault kinds, and their rates, toward the cells not reached yet.

Why: a hunt that faults every run the same way keeps putting the queue in the situations it has seen,
and the bug hides in one it has not (issue 23: a register that resets an uncertain task survived 90 s of
hunting because no run ever registered an uncertain task again). Coverage-guided search (AFL,
Antithesis) steers toward what has not been seen; here "seen" is the model coverage of the runs so far
(summary.json's ``coverage.model``, cells of :mod:`takeover._internal.coverage_space`), and the steering wheel is
the fault mix: each fault kind is known to put the queue in certain cells (:data:`AIMS`), so the kinds
whose cells are still unreached get their rates raised, and one that is off is turned on.

The choice (:func:`steer`) is a pure function of the cells reached so far, the run's rates and the
queue's optional methods: no randomness of its own, so a hunt's runs stay reproducible from their
seeds and the cells reached before them, and every steered run's reproduce line writes its rates.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping
from typing import NamedTuple

from takeover._internal import coverage_space as cs
from takeover._internal.config import RunConfig

# The cells each fault kind puts the queue in, as coverage_space patterns (op/state/caller/time): what
# its windows are built to reach, or, for the kinds that are not aimed, what they make likely. A kind
# raises the chance of its cells; other kinds may reach them too, by luck.
AIMS: dict[str, tuple[str, ...]] = {  # fmt: skip
    "kill": ("claim/running/never/past|edge",),
    "kill_before_action": ("claim/running/never/past|edge",),
    "kill_after_action": ("claim/running/never/past|edge",),
    "kill_during_finish": ("claim/running/never/past|edge", "finish_done|finish_uncertain/done|uncertain/holder/none"),
    "pause": ("finish_done|finish_uncertain/running/expired|stale/*", "extend/running/expired|stale/*"),
    "expire_and_return": ("finish_done|finish_uncertain/running/expired/edge|past",),
    "stale_return": ("finish_done|finish_uncertain/running|done|uncertain/stale/*",),
    "claim_stampede": ("claim/pending/never/none",),
    "duplicate_register": ("register/pending|running|done|uncertain/never/*",),
    "freeze_in_call": ("finish_done|finish_uncertain/running/stale/*", "claim/running/never/*"),
    "stale_heartbeat": ("extend/running|done|uncertain/stale/*",),
    "lease_edge": ("finish_done|finish_uncertain/running/holder|expired/edge",
                   "finish_done|finish_uncertain/running/expired/past"),
    "lose_reply": ("finish_uncertain/running/holder/*", "register/uncertain/never/none", "claim/uncertain/never/none"),
    "slow": ("finish_done|finish_uncertain/running/expired|stale/*", "extend/running/expired|stale/*"),
}
BOOST = 2.0  # a kind's rate is raised by this factor per unreached cell it aims at ...
MOST = 4.0  # ... up to this factor
SHOWN = 6  # cells named on a steering line
TOP = 3  # how many kinds a run is steered with
# The rate a kind that is off gets when turned on for its cells (per second, or a probability).
ON_RATE_PER_S = 0.25
ON_PROBABILITY = 0.05


class Steering(NamedTuple):
    """One run's steered mix: its rates, the unreached cells it steers toward, and by which kinds."""

    faults: dict[str, float]
    toward: list[str]  # unreached cells some kind of the mix aims at
    kinds: dict[str, float]  # kind -> the factor its rate was raised by (turned on: its new rate)
    faults_before: dict[str, float]  # the rates before steering

    def describe(self) -> str:
        """The steering in a line: the cells (the first few) and the kinds raised."""
        if not self.toward:
            return "no unreached cell any fault kind aims at"
        cells = ", ".join(self.toward[:SHOWN]) + (f" and {len(self.toward) - SHOWN} more"
                                                  if len(self.toward) > SHOWN else "")
        kinds = ", ".join(f"{k} x{f:g}" if self.faults_before.get(k) else f"{k} on at {f:g}"
                          for k, f in self.kinds.items())
        return f"toward {len(self.toward)} unreached cell(s) ({cells}) with {kinds}"


def aimed_cells(kind: str, extensions: Iterable[str]) -> list[str]:
    """The possible cells ``kind`` aims at, for a queue with these optional methods."""
    exts = tuple(extensions)
    out: list[str] = []
    for pattern in AIMS.get(kind, ()):
        try:
            out += [c for c in cs.expand(pattern, exts) if c not in out]
        except ValueError:  # the pattern names no possible cell for this queue (extend without extend())
            continue
    return out


def steer(faults: Mapping[str, float], reached: Collection[str], extensions: Iterable[str],
          tried: Mapping[str, int] | None = None, probabilities: Collection[str] = ("lose_reply", "slow"),
          top: int = TOP) -> Steering:
    """The mix ``faults`` steered toward the possible cells not in ``reached``.

    Each kind scores the unreached cells it aims at, each weighed 1 / (1 + the runs already steered
    toward it, ``tried``): a cell no steered run reached loses its pull, so the steering moves on to
    the next (a cell no fault can bring about must not hold every run). The ``top`` kinds by score
    (ties in ``faults`` order) have their rate raised by min(BOOST ** n, MOST) for their n unreached
    cells (a probability capped at 1), or, when off, are turned on (ON_RATE_PER_S, or ON_PROBABILITY
    for the kinds in ``probabilities``); the others keep theirs. Deterministic: same inputs, same mix."""
    exts = tuple(extensions)
    seen = set(reached)
    unreached = [c for c in cs.possible(exts) if c not in seen]
    missing = set(unreached)
    pulls = tried or {}
    rates = {k: float(v) for k, v in faults.items()}
    scored: list[tuple[float, int, str, list[str]]] = []
    for i, kind in enumerate(rates):
        mine = [c for c in aimed_cells(kind, exts) if c in missing]
        if mine:
            scored.append((-sum(1.0 / (1 + pulls.get(c, 0)) for c in mine), i, kind, mine))
    raised: dict[str, float] = {}
    toward: set[str] = set()
    for _score, _i, kind, mine in sorted(scored)[:top]:
        toward.update(mine)
        if rates[kind] > 0:
            factor = min(BOOST ** len(mine), MOST)
            new = rates[kind] * factor
            raised[kind] = factor
        else:
            new = ON_PROBABILITY if kind in probabilities else ON_RATE_PER_S
            raised[kind] = new
        rates[kind] = float(f"{min(new, 1.0) if kind in probabilities else new:.3g}")
    return Steering(rates, [c for c in unreached if c in toward], raised, {k: float(v) for k, v in faults.items()})


def steered(cfg: RunConfig, reached: Collection[str], extensions: Iterable[str],
            tried: Mapping[str, int] | None = None) -> tuple[RunConfig, Steering]:
    """``cfg`` with its fault rates steered (:func:`steer`); its reproduce line writes them all."""
    from takeover._internal.options import WORKER_FAULTS

    s = steer(cfg.faults, reached, extensions, tried, probabilities=WORKER_FAULTS)
    return dataclasses.replace(cfg, faults=s.faults), s
