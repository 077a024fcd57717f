"""One random stream per name from a run's ``--seed``: every random choice of a run comes from it.

Why streams by name: the nemesis' fault kinds, the swarm's draw of each kind's rate, each incarnation's
clock and the network faults each draw from their own stream, so that one of them drawing more or
less (a kind pinned, a fault added) does not shift what the others draw; the same seed gives the same
choices. Why a module of its own: the runner, the swarm and the network faults all use it, and it
imports nothing of takeover.
"""

from __future__ import annotations

import zlib


def stream_seed(seed: int, name: str) -> int:
    """The seed of stream ``name`` of a run seeded ``seed``."""
    return (seed * 2_654_435_761 + zlib.crc32(name.encode())) & 0xFFFFFFFF
