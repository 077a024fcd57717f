"""``takeover tune`` for real: a queue that breaks an invariant gets no recommendation but the violation,
loudly, after its first run (a few seconds: the search stops at the first violating run); and (nightly) a
tuning on hosts, whose every run is on them under the network faults, scaled."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.helpers.processes import REPO, reap_stragglers, takeover

pytestmark = pytest.mark.timeout(90)


@pytest.mark.slow
def test_a_violating_queue_gets_the_violation_and_no_recommendation(tmp_path):
    times = tmp_path / "times.json"
    times.write_text(json.dumps({"p50": 20, "p90": 30, "p99": 40, "max": 50}))
    out = tmp_path / "tune"
    try:
        proc = takeover("tune", "--task-times", str(times), "--queue", "takeover.queues.planted:BumpsByTwo",
                        "--target", "200", "--budget", "1", "--out", str(out), timeout=80)
    finally:
        for cell in (out / "cells").glob("*"):
            reap_stragglers(cell)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    data = json.loads((out / "tuning.json").read_text())
    assert (data["lease"], data["heartbeat"], data["resolved"], data["runs"]) == (None, None, False, 1)
    assert "generation_monotonic" in data["violations"][0]["violated"]
    assert "!!! NO RECOMMENDATION: the queue violated an invariant" in proc.stderr
    assert "INVARIANT VIOLATED" in proc.stderr  # the runner's own loud line, as the sweep prints it
    assert "recommended lease" not in proc.stdout
    assert "NO RECOMMENDATION" in (out / "tuning.md").read_text() and "class='bad'" in (out / "tuning.html").read_text()
    assert data["command"].startswith("takeover tune --task-times ") and "--time-scale " in data["command"]


@pytest.mark.nightly  # a tuning's runs on hosts: about 45 s (two runs of a 1-minute budget), needs root
@pytest.mark.needs_package("postgresql")
@pytest.mark.needs_package("iptables")
@pytest.mark.skipif(os.geteuid() != 0, reason="--hosts needs root (network namespaces)")
@pytest.mark.timeout(150)
def test_a_tuning_on_hosts_runs_every_run_on_them_under_the_scaled_network_faults(tmp_path):
    from tests.system.test_postgres import _env

    times = tmp_path / "times.json"
    times.write_text(json.dumps({"p50": 20, "p90": 30, "p99": 40, "max": 50}))
    out = tmp_path / "tune"
    try:
        proc = subprocess.run([sys.executable, "-m", "takeover", "tune", "--task-times", str(times), "--db", "postgres",
                               "--hosts", "2", "--target", "200", "--budget", "1", "--time-scale", "33",
                               "--partition-rate", "0.01", "--conn-kill-rate", "0.005", "--out", str(out)],
                              cwd=REPO, env=_env(), capture_output=True, text=True, timeout=130)  # fmt: skip
    finally:
        for cell in (out / "cells").glob("*"):
            reap_stragglers(cell)
    assert proc.returncode in (0, 3), proc.stdout + proc.stderr
    data = json.loads((out / "tuning.json").read_text())
    assert data["network"]["runs"] == {"hosts": 2, "partition_rate": 0.33, "conn_kill_rate": 0.165}
    assert "--hosts 2 --partition-rate 0.01 --conn-kill-rate 0.005 --db postgres" in data["command"]
    cells = sorted((out / "cells").glob("*"))
    assert cells and len(cells) == data["runs"]
    for cell in cells:
        config = json.loads((cell / "config.json").read_text())
        scale = config["task_time"]["scale"]  # 33, or half of it in the scale check's runs
        assert (config["hosts"], config["partition_rate"]) == (2, round(0.01 * scale, 6)), cell
        assert "--hosts 2" in config["command"]
        history = [json.loads(line) for line in (cell / "history.jsonl").read_text().splitlines()]
        assert {r["host"] for r in history if r["f"] == "spawn"} == {"h1", "h2"}
        assert any(r["f"] == "partition" for r in history), cell
