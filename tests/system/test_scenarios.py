"""`takeover scenarios` as a real process: the installed entry point, bad input, and queues that hang.

Queues that hang (tests/fixtures/queues/hanging_queue.py) run only in a real ``takeover`` process: a
hung call leaves a thread stuck for good, and what is under test is that the process still exits,
with its verdict, and leaves nothing behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from hanging_queue import MARKER_ENV

from tests.helpers.processes import REPO
from tests.helpers.queues import child_env

pytestmark = pytest.mark.usefixtures("scenario_scratch")


def test_installed_console_script_json():
    """The real entry point, in its own process, as a user or CI runs it."""
    exe = Path(sys.executable).with_name("takeover")
    if not exe.exists():
        exe = REPO / ".venv" / "bin" / "takeover"
    proc = subprocess.run(
        [str(exe), "scenarios", "--json"], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["ok"] is True and len(doc["scenarios"]) == 5
    assert sum(len(s["steps"]) for s in doc["scenarios"]) == 34


def test_bad_input_in_a_real_process():
    env = dict(os.environ, PYTHONPATH="")
    proc = subprocess.run(
        [sys.executable, "-m", "takeover", "scenarios", "--queue", "nope_not_a_module:Q"],
        capture_output=True, text=True, timeout=120, cwd=REPO, env=env,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [
        "takeover: error: queue module 'nope_not_a_module' not found (nope_not_a_module is missing); looked in the "
        f"current folder ({REPO}) and on the import path; run from the folder that holds it, or add that folder to "
        "PYTHONPATH"
    ]


# ------------------------------------------------------------------------------ queues that hang

HANG_TIMEOUT = "1.5"


def start_scenarios(tmp_path: Path, *args: str) -> tuple[subprocess.Popen, Path]:
    """The real command in its own session (so SIGINT to its group is a terminal's Ctrl-C), its
    temporary folders in this test's scratch folder, and a marker the hanging queue writes."""
    marker = tmp_path / "hang-marker"
    env = child_env() | {"TMPDIR": str(tmp_path / "scratch"), "COLUMNS": "140", MARKER_ENV: str(marker)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "takeover", "scenarios", *args],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    return proc, marker


JANITOR_GRACE = 5.0  # seconds


def left_behind(marker: Path) -> list[psutil.Process]:
    """Live processes that inherited this test's marker: the command or anything it started."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get(MARKER_ENV) == str(marker) and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def finish(proc: subprocess.Popen, marker: Path, timeout: float = 60) -> tuple[str, str]:
    """Wait for the command's own exit (a hang shows up as TimeoutExpired), then make sure nothing of
    it survives; whatever happened, kill what is left so a failing test leaves no process either."""
    try:
        out, err = proc.communicate(timeout=timeout)
        # The scratch janitor (takeover._internal.scratch) removes the folders after the command's end, by design: a
        # process that is still ending is given a few seconds; one that stays is an orphan.
        deadline = time.monotonic() + JANITOR_GRACE
        while (left := left_behind(marker)) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for straggler in left_behind(marker):
            straggler.kill()
    assert not left, f"processes outlived takeover scenarios: {left}"
    return out, err


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_a_hung_claim_fails_its_step_and_the_other_scenarios_still_run(tmp_path):
    proc, marker = start_scenarios(tmp_path, "--queue", "hanging_queue:ClaimHangsInS2", "--step-timeout", HANG_TIMEOUT)
    out, err = finish(proc, marker)
    assert marker.exists(), "the queue never reached its hang: this run proves nothing"
    assert proc.returncode == 1, out + err
    assert err == "" and "Traceback" not in out
    assert "✗ S2 step 4 (t=30 B claim): error: claim() did not return within 1.5 s" in out
    assert "S2 stopped at step 4: claim() did not return within 1.5 s; steps 5-7 not run" in out
    # Every other scenario ran to its end on a fresh queue, and matched: the hung step is the only
    # failing row of 34, S2 the only failing scenario, and the ledgers of S4 and S5 were judged.
    for sid in ("S1", "S3", "S4", "S5"):
        assert f"{sid} — " in out
    assert out.count("FAIL") == 1
    assert out.count("\nskip ") == 3
    assert "ledger: 1 action(s) performed (expected 1)" in out
    assert "ledger: 2 action(s) performed (expected 2)" in out
    assert "1 of 34 steps differ from the spec (S2) on hanging_queue:ClaimHangsInS2." in out
    assert "1 scenario(s) stopped at a queue call that did not return within 1.5 s (S2); 3 step(s) not run." in out


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_every_kind_of_hang_is_reported_where_it_happened(tmp_path):
    """A hang in the action, in the observing snapshot (a spinning loop that holds the GIL), in the
    constructor before the first step, and in the reopen of 'worker exits' (HangsFourWays)."""
    proc, marker = start_scenarios(
        tmp_path, "--json", "--queue", "hanging_queue:HangsFourWays", "--step-timeout", HANG_TIMEOUT
    )
    out, err = finish(proc, marker)
    assert proc.returncode == 1, out + err
    assert err == ""
    doc = json.loads(out)
    assert doc["ok"] is False and doc["step_timeout"] == 1.5
    by_id = {s["id"]: s for s in doc["scenarios"]}
    assert list(by_id) == ["S1", "S2", "S3", "S4", "S5"]
    assert by_id["S1"]["ok"] is True and "hung" not in by_id["S1"]
    assert all(st["ok"] for st in by_id["S1"]["steps"])
    opening = "opening the queue (hanging_queue:HangsFourWays) did not return within 1.5 s"
    expected = {  # scenario: (call, step, error, steps that ran before it)
        "S2": ("claim", 4, "claim() did not return within 1.5 s", 3),
        "S3": ("snapshot", 3, "snapshot() did not return within 1.5 s", 2),
        "S4": ("open", None, opening, 0),
        "S5": ("open", 4, opening, 3),
    }
    for sid, (call, step, error, ran) in expected.items():
        sc = by_id[sid]
        assert sc["ok"] is False
        assert sc["hung"] == {"call": call, "step": step, "step_timeout": 1.5, "error": error}
        assert "final_ledger_actions" not in sc  # not judged: the run of the scenario was cut short
        steps = sc["steps"]
        assert all(st["ok"] and "skipped" not in st for st in steps[:ran])
        if step is not None:
            hung = steps[step - 1]
            assert hung["ok"] is False and hung["hung"] is True and hung["error"] == error
            assert hung["returns"] is None and hung["state"] is None
        after = steps[step or 0:]
        assert after and all(st["skipped"] is True and st["ok"] is False and "error" not in st for st in after)
        assert all("expected" in st for st in after)  # what the spec would have checked


@pytest.mark.timeout(90)
def test_ctrl_c_during_a_hung_step_exits_130_and_cleans_up(tmp_path):
    # A step timeout far beyond the test's patience: only Ctrl-C can end this run in time.
    proc, marker = start_scenarios(tmp_path, "--queue", "hanging_queue:ClaimHangsInS2", "--step-timeout", "600")
    try:
        deadline = time.monotonic() + 60
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), "the queue never reached its hang"
        os.killpg(proc.pid, signal.SIGINT)
    finally:
        out, err = finish(proc, marker, timeout=30)
    assert proc.returncode == 130, out + err
    assert err == "takeover: interrupted\n"
    # The scratch folder being empty (autouse fixture) shows S2's files were removed on the way out.
