"""takeover.stress checks a run once, in the caller's process, before the run's child exists.

Why: the API used to check the folder, the database and the queue's contract itself (so that bad input is a
one-line UsageError before anything starts), and then its child ran the whole of ``takeover stress``, which
checked all three again: the queue was opened on a scratch database twice per run. The checks stay where the
user hears them first (takeover._internal.stress_run.checked, in the caller) and the child runs what follows
(takeover._internal.stress_run.run_checked). A real run, a queue that notes each database it is opened on.
"""

from __future__ import annotations

import os

import takeover
from tests.helpers.queues import FIXTURE_QUEUES

QUEUE = "counted_queue:CountsOpens"


def test_the_queue_is_checked_once_and_in_the_callers_process(tmp_path, monkeypatch) -> None:
    opens = tmp_path / "opens.txt"
    monkeypatch.setenv("COUNTED_OPENS_FILE", str(opens))
    monkeypatch.syspath_prepend(str(FIXTURE_QUEUES))  # importable here; the run's path gets the folder
    result = takeover.stress(QUEUE, profile="smoke", seed=1, duration=1, tasks=10, out=str(tmp_path / "run"))
    assert result.exit_code == 0, result.output[-3000:]
    lines = [line.split(" ", 1) for line in opens.read_text().splitlines()]
    checks = [int(pid) for pid, path in lines if "takeover-check-" in path]  # the contract check's scratch
    assert checks == [os.getpid()], f"the contract check ran in {checks}; the caller is {os.getpid()}"
    assert any("takeover-check-" not in path for _, path in lines), "the run's workers opened the queue too"
