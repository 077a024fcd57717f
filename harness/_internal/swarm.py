"""Swarm testing: each seed draws its own mix of fault kinds and rates (``--swarm``).

Why: a run with every fault kind on at once is not the most searching run. Faults mask each other:
a kill ends a pause before the paused holder outlives its lease, lost replies turn the tasks that
a stale finish would have hit into ``uncertain`` ones, and a high rate of one kind crowds out the
states another kind needs. Swarm testing (Groce et al., "Swarm Testing", ISSTA 2012; FoundationDB's
simulation does the same with its "buggify" knobs) leaves a random part of the kinds out of each run
and varies the rates of the rest, so across seeds some runs have a masking kind absent, and the
set of runs as a whole reaches states that the all-on configuration rarely does.

The draw, for every kind that was not given explicitly: the kind is on with probability 1/2 (the steered
``aim_unreached`` always: :data:`ALWAYS_ON`), and
when on its rate is its centre (the profile's rate, or :data:`DEFAULT_RATES` where the profile has
0) times a factor drawn log-uniform between 1/:data:`SPAN` and :data:`SPAN`; a probability is capped
at 1. When no kind ends up on, one of the drawn kinds is turned on (chosen by the seed), so a swarm
run is never a run without faults. Rates are rounded to three significant digits, so the reproduce
line stays readable and reads back to exactly the same value.

Every choice comes from the run's seed, each kind from its own named stream (as the nemesis does,
:func:`takeover._internal.seeds.stream_seed`): a kind's draw does not change when another kind is pinned,
or when a new kind is added to :data:`takeover._internal.options.FAULT_KINDS`.

The result is a plain :class:`RunConfig` whose ``faults`` hold the drawn rates and whose ``swarm``
is True. Its reproduce line writes every rate explicitly and ``--swarm``; an explicit rate pins its
kind, so that line draws nothing and gives the same config back, however the profile changes later.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Iterable

from takeover._internal.config import RunConfig
from takeover._internal.options import FAULT_KINDS, NEMESIS_FAULTS
from takeover._internal.seeds import stream_seed

SPAN = 4.0  # a drawn rate lies between centre / SPAN and centre * SPAN, log-uniform
P_ON = 0.5  # each kind is in the mix with this probability
# The centre of a kind whose profile rate is 0: the stress profile's rate of one kill aim, per second,
# for the nemesis' kinds; a few per cent of tasks or actions for the kinds a worker draws.
DEFAULT_RATE_PER_S = 0.25
DEFAULT_PROBABILITY = 0.05
SIGNIFICANT = 3
# Kinds a swarm draw never leaves out (their rate is drawn as the others'): aim_unreached steers the run toward
# the cells its mix has not reached (takeover._internal.run.aim_unreached), whatever the mix, so it is not one of the
# kinds whose absence a swarm run varies.
ALWAYS_ON = ("aim_unreached",)


def centre(cfg: RunConfig, kind: str) -> float:
    """The rate a swarm draw of ``kind`` is centred on: the config's own, or a default where that is 0."""
    rate = float(cfg.faults.get(kind, 0.0))
    if rate > 0:
        return rate
    return DEFAULT_RATE_PER_S if kind in NEMESIS_FAULTS else DEFAULT_PROBABILITY


def _rate(cfg: RunConfig, kind: str, factor: float) -> float:
    rate = float(f"{centre(cfg, kind) * factor:.{SIGNIFICANT}g}")
    return rate if kind in NEMESIS_FAULTS else min(rate, 1.0)


# The network's kinds (takeover._internal.run.net_faults), drawn only in a run with hosts, each around this rate per
# second when the run gives it none; one given (above 0) is kept as given.
NETWORK_RATES = {"partition_rate": 0.3, "conn_kill_rate": 0.2, "db_restart_rate": 0.05}


def _network(cfg: RunConfig) -> dict[str, float]:
    """A run with hosts: each network kind not given is on with probability 1/2, around its rate; from its
    own stream of the seed, as the other kinds."""
    rates: dict[str, float] = {}
    for name, default in NETWORK_RATES.items():
        rng = random.Random(stream_seed(cfg.seed, f"swarm:{name}"))
        on = rng.random() < P_ON
        factor = math.exp(rng.uniform(-math.log(SPAN), math.log(SPAN)))
        if getattr(cfg, name) <= 0:
            rates[name] = float(f"{default * factor:.{SIGNIFICANT}g}") if on else 0.0
    return rates


def draw(cfg: RunConfig, pinned: Iterable[str] = ()) -> RunConfig:
    """``cfg`` with the rate of every fault kind not in ``pinned`` drawn from ``cfg.seed``, and ``swarm`` set;
    with hosts, the network's kinds too (:func:`_network`).

    ``cfg``'s own rates are the centres (see the module docstring); the pinned kinds keep theirs.
    """
    keep = set(pinned)
    drawn = [k for k in FAULT_KINDS if k not in keep]
    rates = {k: float(cfg.faults.get(k, 0.0)) for k in FAULT_KINDS}
    factors: dict[str, float] = {}
    for kind in drawn:
        rng = random.Random(stream_seed(cfg.seed, f"swarm:{kind}"))
        on = rng.random() < P_ON or kind in ALWAYS_ON
        factors[kind] = math.exp(rng.uniform(-math.log(SPAN), math.log(SPAN)))  # drawn on or off: streams stay put
        rates[kind] = _rate(cfg, kind, factors[kind]) if on else 0.0
    if drawn and not any(rates.values()):
        forced = random.Random(stream_seed(cfg.seed, "swarm")).choice(drawn)
        rates[forced] = _rate(cfg, forced, factors[forced])
    drawn_cfg = dataclasses.replace(cfg, faults=rates, swarm=True)
    if cfg.hosts > 0:
        net = _network(cfg)
        drawn_cfg = dataclasses.replace(drawn_cfg, partition_rate=net.get("partition_rate", cfg.partition_rate),
                                        conn_kill_rate=net.get("conn_kill_rate", cfg.conn_kill_rate),
                                        db_restart_rate=net.get("db_restart_rate", cfg.db_restart_rate))
    return drawn_cfg


def mix(cfg: RunConfig) -> dict[str, float]:
    """The kinds a config has on, with their rates: what a swarm draw chose, in report order (the network's last)."""
    kinds = {k: float(cfg.faults.get(k, 0.0)) for k in FAULT_KINDS if cfg.faults.get(k, 0.0) > 0}
    return kinds | {n.removesuffix("_rate"): float(getattr(cfg, n)) for n in NETWORK_RATES if getattr(cfg, n) > 0}


def describe(cfg: RunConfig) -> str:
    """The mix in a few words for a progress line: ``kill 0.41, pause 1.2`` (``no faults`` when empty)."""
    return ", ".join(f"{k} {v:g}" for k, v in mix(cfg).items()) or "no faults"
