"""Heartbeats stop zombie duplicates from slow tasks, on real runs without any fault.

Work takes 0.15-0.45 s against a 0.3 s lease, so without heartbeats about half the attempts outlive
their lease, another worker takes the task over and both act (``lost_lease`` duplicates). With a
heartbeat every 0.08 s the holder keeps its lease (fenced extends) and no task is acted on twice.
A queue without ``extend`` runs without heartbeats, and the summary and report say so.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.processes import reap_stragglers, records, takeover

pytestmark = [pytest.mark.timeout(150), pytest.mark.slow]

SLOW = ("--profile", "smoke", "--no-faults", "--workers", "3", "--tasks", "24", "--duration", "1", "--seed", "4",
        "--lease", "0.3", "--task-time-dist", "uniform", "--task-time-mean", "0.3", "--task-time-spread", "0.5",
        "--task-time-max", "0")


def _run(tmp_path: Path, name: str, *extra: str) -> tuple[Path, dict]:
    run_dir = tmp_path / name
    try:
        proc = takeover("stress", *SLOW, *extra, "--out", str(run_dir), timeout=120)
    finally:
        reap_stragglers(run_dir)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return run_dir, json.loads((run_dir / "summary.json").read_text())


def test_without_heartbeats_slow_tasks_act_twice(tmp_path):
    _, summary = _run(tmp_path, "fixed")
    assert summary["duplicates"]["by_cause"]["lost_lease"] > 0
    assert summary["heartbeat"]["in_effect"] is False


def test_heartbeats_keep_the_lease_and_remove_zombie_duplicates(tmp_path):
    run_dir, summary = _run(tmp_path, "beat", "--heartbeat", "0.08")
    assert summary["valid"] is True
    assert summary["duplicates"]["tasks"] == 0
    assert summary["heartbeat"]["in_effect"] is True
    assert summary["heartbeat"]["extends"]["ok"] > 0
    extends = [r for r in records(run_dir) if r["f"] == "extend" and r["type"] == "ok"]
    assert extends and all(r["lease_until"] > 0 for r in extends)
    assert "heartbeat every 0.08s: in effect" in (run_dir / "report.md").read_text()


@pytest.mark.nightly
def test_a_queue_without_extend_runs_without_heartbeats_and_says_so(tmp_path):
    run_dir, summary = _run(tmp_path, "bare", "--heartbeat", "0.08", "--queue", "queue_without_extensions:BareQueue")
    assert not [r for r in records(run_dir) if r["f"] == "extend"]
    assert summary["heartbeat"]["in_effect"] is False
    assert "WITHOUT heartbeats" in summary["heartbeat"]["note"]
    assert "WITHOUT heartbeats" in (run_dir / "report.md").read_text()
    config = json.loads((run_dir / "config.json").read_text())
    assert config["queue_capabilities"] == {"extend": False, "register_many": False, "resolve": False}
    # Re-checked where the queue cannot be imported, the run still knows it had no extend(): the
    # checker reads what the run recorded, never the queue's code.
    config["queue"] = "not_installed_anywhere:BareQueue"
    (run_dir / "config.json").write_text(json.dumps(config))
    proc = takeover("check", str(run_dir), "--no-reports")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads((run_dir / "summary.json").read_text())["heartbeat"] == summary["heartbeat"]
