"""`takeover replay` as users run it: a real process on a stored real run, and the pytest file it
writes run by a real pytest, failing on the buggy queue and passing on the reference queue.

Every planted bug, the shrinking and the reasons a replay gives are tests/quality/test_replay.py
(in this process); malformed scenario files are tests/unit/test_scenario_file.py.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from takeover.contract import REFERENCE_QUEUE
from tests.helpers.processes import takeover
from tests.helpers.queues import child_env

STORED = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "planted-steals"


@pytest.mark.slow
def test_replay_writes_a_pytest_file_that_fails_until_the_queue_is_fixed(tmp_path):
    run = shutil.copytree(STORED, tmp_path / "run")
    proc = takeover("replay", str(run), "--json", timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["scenario_file"] == str(run / "replay.json")
    test_file = Path(doc["test_file"])
    assert test_file == run / "test_replay.py"
    env = child_env()
    pytest_cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(run), str(test_file)]
    buggy = subprocess.run(pytest_cmd, capture_output=True, text=True, timeout=120, env=env, cwd=run)
    assert buggy.returncode == 1, buggy.stdout + buggy.stderr
    assert "lease_exclusive step 3" in buggy.stdout  # the failing step, in one line
    fixed = subprocess.run(pytest_cmd, capture_output=True, text=True, timeout=120,
                           env={**env, "TAKEOVER_QUEUE": REFERENCE_QUEUE}, cwd=run)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr


def test_the_fix_named_with_queue_says_fixed_and_exits_0(tmp_path):
    """The new user's path from a violation to a fix: the stored real run of StealsLiveLeases replayed
    on the fixed queue (a real process) says FIXED, exit 0, and nothing is written (nothing broke)."""
    run = shutil.copytree(STORED, tmp_path / "run")
    proc = takeover("replay", str(run), "--queue", REFERENCE_QUEUE, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"FIXED on {REFERENCE_QUEUE}" in proc.stdout and "NOT REPRODUCED" not in proc.stdout
    assert "a one-task replay makes no two calls at once (races)" in proc.stdout
    assert not (run / "replay.json").exists()


def test_a_run_of_a_users_own_queue_replays_from_any_folder(tmp_path):
    """The run was made from the user's project folder (config.json ``workdir``), and the queue's module
    lives only there: ``takeover replay`` run from elsewhere finds it as the reproduce line would."""
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "userq_steals.py").write_text("from takeover.queues.planted import StealsLiveLeases as Steals\n")
    run = shutil.copytree(STORED, tmp_path / "run")
    config = json.loads((run / "config.json").read_text())
    config |= {"queue": "userq_steals:Steals", "workdir": str(proj)}
    (run / "config.json").write_text(json.dumps(config))
    proc = takeover("replay", str(run), "--json", cwd=tmp_path, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # reproduced, not "module not found" (2)
    assert json.loads(proc.stdout)["queue"] == "userq_steals:Steals"


@pytest.mark.parametrize("args, words", [
    (["replay"], "the following arguments are required: RUN_DIR"),
    (["replay", "/nonexistent/run"], "/nonexistent/run"),
    (["replay", str(STORED), "--repeat", "x"], "--repeat"),
])
def test_bad_input_exits_2_with_one_line(args, words):
    proc = takeover(*args, timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1 and words in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stdout == ""


@pytest.mark.timeout(60)
def test_a_queue_that_hangs_stops_the_replay_with_its_verdict(tmp_path):
    """A queue whose finish never returns: the replay gives up at the first hung call (one step
    timeout, not one per sequence it would have tried), says so, and exits 3 with nothing shrunk."""
    run = shutil.copytree(STORED.parent / "planted-finish-ignores-generation", tmp_path / "run")
    proc = takeover("replay", str(run), "--queue", "hanging_queue:FinishBlocks", "--step-timeout", "0.5",
                    "--json", timeout=45)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert "finish() did not return within 0.5 s" in doc["hung"]
    assert doc["reproduced"] == 0 and doc["scenario_file"] is None
    first = doc["tasks"][0]
    assert all("the queue hung in the replay" in why for why in first["not_reproduced"].values())
    assert len(doc["tasks"]) == 1  # nothing after the hang
