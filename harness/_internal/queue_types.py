"""What a queue's calls return, as types: a claim, and one row of a snapshot (docs/spec.md).

Why a module of its own, apart from the contract (takeover.contract, which names them too): the
``exec:`` bridge (takeover._internal.bridge) builds these values from a process's JSON lines and is loaded by
the contract, so the words both need stand below both; it imports nothing of takeover.
"""

from __future__ import annotations

Claim = tuple[str, int, float]  # (task id, generation, lease_until)
SnapshotRow = tuple[str, str, int, float | None]  # (task id, state, generation, lease_until or None)
