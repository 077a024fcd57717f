"""litequeue 0.9 behind the contract, in real processes: racing claimers, the spec's scenarios
through the command line, and a short stress run.

As in tests/unit/test_adapter_litequeue.py, the promises litequeue does not keep are findings,
asserted so that a change in the library or the adapter shows up here rather than silently in a
stress report; docs/adapters.md explains each of them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

litequeue = pytest.importorskip("litequeue", reason="litequeue is an optional extra: pip install '.[litequeue]'")

from takeover.contract import open_queue  # noqa: E402
from tests.helpers.processes import reap_stragglers, stragglers  # noqa: E402

SPEC = "takeover.adapters.litequeue:LiteQueueAdapter"


RACER = """
import json, sys
from takeover.contract import open_queue
q = open_queue(sys.argv[1], sys.argv[2])
got = []
while (claim := q.claim(sys.argv[3], 1.0, 30.0)) is not None:
    got.append(claim[:2])
q.close()
print(json.dumps(got))
"""


def test_racing_processes_never_receive_the_same_task_and_generation(tmp_path: Path) -> None:
    db = str(tmp_path / "queue.sqlite")
    q = open_queue(SPEC, db)
    q.register_many([f"t{i:03d}" for i in range(300)], 0.0)
    q.close()
    procs = [
        subprocess.Popen([sys.executable, "-c", RACER, SPEC, db, f"w{i}"], stdout=subprocess.PIPE, text=True)
        for i in range(4)
    ]
    claims: list[tuple[str, int]] = []
    try:
        for p in procs:
            stdout, _ = p.communicate(timeout=90)
            assert p.returncode == 0
            claims += [tuple(c) for c in json.loads(stdout)]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert len(claims) == 300
    assert len(set(claims)) == 300
    assert {gen for _, gen in claims} == {1}


# -- the spec's scenarios, through the CLI a user runs ----------------------------------------------

# (scenario, step) -> what litequeue returns there; every other step of S1-S5 matches the spec.


EXPECTED_SCENARIO_FAILURES = {
    # the strict expiry: at t=31 (lease_until) litequeue still holds A's lock, so B gets nothing ...
    ("S2", 5): None,
    ("S3", 5): None,
    ("S5", 6): None,
    # ... and every later step differs in the generation (1 instead of 2); moreover
    ("S2", 6): True,  # B finishes a task it never claimed: done() does not check the holder
    ("S2", 7): None,
    ("S3", 6): True,  # A's finish at t=32, after its lease ran out at 31, is accepted
    ("S3", 7): True,
    ("S3", 8): None,
    ("S5", 7): 2,  # B replays the action (the scenario's own step; the ledger shows 2)
    ("S5", 8): True,
}


def test_scenarios_pass_and_fail_exactly_where_documented() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "takeover", "scenarios", "--queue", SPEC, "--json"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 1, proc.stderr  # 1: some step differs from the spec, not a crash
    report = json.loads(proc.stdout)
    failures = {
        (sc["id"], i): step["returns"]
        for sc in report["scenarios"]
        for i, step in enumerate(sc["steps"], start=1)
        if not step["ok"]
    }
    assert failures == EXPECTED_SCENARIO_FAILURES
    assert {sc["id"]: sc["ok"] for sc in report["scenarios"]} == {
        "S1": True, "S2": False, "S3": False, "S4": True, "S5": False,
    }
    assert not any("error" in step for sc in report["scenarios"] for step in sc["steps"])


# -- a short stress run: real workers, SIGKILL, SIGSTOP, lost replies -------------------------------

# What litequeue can violate (its completion is unfenced, and retry()/done() race by message id),
# and what it cannot: the lock itself is exclusive and the adapter's generation is an exact count.


MAY_BREAK = {
    "no_stale_commit", "finish_within_lease", "single_finish", "no_reclaim_after_terminal",
    "state_matches_history", "no_lost_task",
    # The release sweep (list_locked + retry) is not atomic with pop(): two workers can release the
    # same expired lock and both pop it, so one task is handed out twice at once (seen: smoke, seed 3).
    "lease_exclusive",
}


MUST_HOLD = {"generation_monotonic"}


@pytest.mark.slow
def test_smoke_stress_run_reaches_a_verdict(tmp_path: Path) -> None:
    out = tmp_path / "run"
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "takeover", "stress", "--profile", "smoke", "--queue", SPEC,
             "--seed", "3", "--tasks", "40", "--out", str(out)],
            capture_output=True, text=True, timeout=180,
        )
        left = stragglers(out)  # a finished run leaves no worker or service behind
    finally:
        reap_stragglers(out)
    assert not left, left
    assert proc.returncode in (0, 1), proc.stdout[-2000:] + proc.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["exit_code"] == proc.returncode
    invariants = summary["invariants"]
    assert set(invariants) == MAY_BREAK | MUST_HOLD
    broken = {name for name, verdict in invariants.items() if verdict["valid"] is False}
    assert broken <= MAY_BREAK, broken
    assert all(invariants[name]["valid"] is True for name in MUST_HOLD)
    assert (proc.returncode == 1) == bool(broken)
    # litequeue never refuses a completion of a known task: whatever the faults, nothing is fenced.
    assert summary["counts"]["finishes"]["rejected"] == 0
    assert summary["counts"]["claims"]["ok"] > 0
