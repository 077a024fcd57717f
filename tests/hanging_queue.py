"""Reference queues that never return from one call, for ``takeover scenarios --step-timeout``.

Importable by a ``takeover`` subprocess through PYTHONPATH (see stress_helpers.test_env). Each
queue hangs only in chosen scenarios, recognised by the temporary folder ``takeover scenarios``
makes for each one (``takeover-S2-…``), so one run shows both a hung scenario and the others
still passing. Two ways to hang, because they stress the harness differently:

- ``block``: waits on an event nobody sets, like a lock never released (no CPU, no GIL held);
- ``spin``: an infinite Python loop, like a retry loop that never ends (it competes for the GIL
  with the harness's own thread until the process exits).

When a call starts hanging it writes its pid to the file named by ``TAKEOVER_TEST_HANG_MARKER``
(if set), so a test knows the moment to press Ctrl-C without sleeping a guessed time.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

from takeover.queues.sqlite_lease import SQLiteLeaseQueue

MARKER_ENV = "TAKEOVER_TEST_HANG_MARKER"
_NEVER = threading.Event()  # never set: waiting on it is a deadlock


def scenario_of(db_path: str) -> str | None:
    match = re.search(r"takeover-(S\d+)-", db_path)
    return match.group(1) if match else None


def hang(how: str) -> None:
    marker = os.environ.get(MARKER_ENV)
    if marker:
        Path(marker).write_text(str(os.getpid()))
    if how == "block":
        _NEVER.wait()
    while True:  # "spin"
        pass


class ClaimHangsInS2(SQLiteLeaseQueue):
    """S2 step 4 (t=30, B claims the expired lease) blocks for good; S1, S3, S4, S5 are untouched."""

    def __init__(self, db_path: str) -> None:
        super().__init__(db_path)
        self._scenario = scenario_of(db_path)

    def claim(self, worker, now, lease):
        if self._scenario == "S2" and now == 30:
            hang("block")
        return super().claim(worker, now, lease)


class HangsFourWays(SQLiteLeaseQueue):
    """One hang per scenario, each in a different place; only S1 runs to its end.

    - S2: claim at t=30 blocks (step 4; steps 5-7 not run);
    - S3: snapshot() of the reopened queue spins (observing step 3; steps 4-8 not run);
    - S4: the constructor blocks before the first step (none of the 7 steps ran);
    - S5: reopening in step 4 ("worker exits") blocks (steps 5-8 not run).
    """

    opens: dict[str | None, int] = {}

    def __init__(self, db_path: str) -> None:
        scenario = scenario_of(db_path)
        self.opens[scenario] = self.opens.get(scenario, 0) + 1
        if (scenario, self.opens[scenario]) in (("S4", 1), ("S5", 2)):
            hang("block")
        super().__init__(db_path)
        self._scenario, self._open = scenario, self.opens[scenario]

    def claim(self, worker, now, lease):
        if self._scenario == "S2" and now == 30:
            hang("block")
        return super().claim(worker, now, lease)

    def snapshot(self):
        if self._scenario == "S3" and self._open == 2:
            hang("spin")
        return super().snapshot()
