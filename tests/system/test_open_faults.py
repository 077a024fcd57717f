"""A fault the worker records itself is closed even when the worker dies in the middle of it.

Why: ``slow`` and ``lose_reply`` are written by the affected worker (invoke at the start, ok at
the end). A SIGKILL in between used to leave the invoke open for ever, so the history said the
task was still being slowed at the end of the run. Now the worker flags the fault on the phase
board while it is open, and the coordinator, when it records the incarnation's exit, writes an
``info`` completion (``error = "process died"``) under the dead worker's process number: the
Jepsen convention for an operation whose process crashed. These are real runs in which every
task is slowed and workers are killed, so deaths inside a fault are certain.
"""

from __future__ import annotations

import pytest

from tests.helpers.processes import records, takeover


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_every_worker_fault_is_closed_and_deaths_close_them_after_the_exit(tmp_path) -> None:
    run = tmp_path / "run"
    # Every slowed task outlives its lease (0.6 s), so 3 workers finish at most ~17 tasks in the 4 s of
    # faults: 40 keep them busy to the end, and smoke's 120 would only lengthen the drain.
    proc = takeover("stress", "--profile", "smoke", "--seed", "1", "--slow-rate", "1", "--lose-reply-rate", "0.5",
                    "--tasks", "40", "--out", str(run), timeout=110)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    recs = records(run)
    exits = {r["target"]: r["time"] for r in recs if r.get("f") == "exit"}
    open_faults: dict[tuple[int, str], dict] = {}
    closed_by_death = []
    for r in recs:
        if r.get("f") not in ("slow", "lose_reply"):
            continue
        key = (r["process"], r["f"])
        if r["type"] == "invoke":
            assert key not in open_faults, f"a second {r['f']} began before the first ended: {r}"
            open_faults[key] = r
            continue
        assert key in open_faults, f"a completion without its invoke: {r}"
        del open_faults[key]
        if r.get("error") == "process died":
            assert r["type"] == "info" and r["target"] == r["process"]
            assert r["time"] >= exits[r["process"]], "closed before its process was seen dead"
            closed_by_death.append(r)
    assert not open_faults, f"faults left open at the end of the run: {list(open_faults.values())[:3]}"
    assert closed_by_death, "no worker died inside a fault: the run did not test what this test is about"
    assert {r["f"] for r in closed_by_death} <= {"slow", "lose_reply"}
