"""The harness under abuse: bad options, Ctrl-C, SIGTERM, a SIGKILLed coordinator, a failing queue.

Every test runs the real ``takeover`` command in a subprocess and then looks for processes of
that run (by the ``TAKEOVER_RUN_DIR`` marker in their environment) with psutil; whatever a test
finds, it kills them, so no test leaves anything behind.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from takeover._internal.options import FAULT_KINDS
from tests.helpers.hold_before_check import HOLD_LINE
from tests.helpers.processes import (
    REPO,
    child_env,
    reap_stragglers,
    records,
    start_takeover,
    stop_and_reap,
    stragglers,
    takeover,
    wait_for_record,
    wait_no_stragglers,
)

pytestmark = pytest.mark.timeout(180)

BAD = [
    (["--lease", "0"], "lease"),
    (["--lease", "-1"], "lease"),
    (["--workers", "0"], "workers"),
    (["--profile", "no-such-profile"], "unknown profile"),
    (["--kill-rate", "-0.5"], "kill-rate"),
    (["--lose-reply-rate", "1.5"], "lose-reply-rate"),
    (["--duration", "0"], "duration"),
    (["--queue", "json:dumps"], "json:dumps"),
    (["--queue", "flaky_queue:NoFinishQueue"], "finish"),
    (["--queue", "no_such_module:Queue"], "no_such_module"),
    (["--workers", "two"], "workers"),
]


@pytest.mark.parametrize(("argv", "named"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_options_exit_2_with_one_line_and_create_nothing(tmp_path, argv, named):
    out = tmp_path / "run"
    proc = takeover("stress", *argv, "--out", str(out), cwd=tmp_path, timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("takeover: error:"), proc.stderr
    assert named in lines[0]
    assert "Traceback" not in proc.stderr
    assert not out.exists() and not (tmp_path / "runs").exists()


def test_unwritable_out_exits_2_before_anything(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as a user who can write anywhere (root)")
        proc = takeover("stress", "--out", str(locked / "run"), timeout=60)
    finally:
        locked.chmod(0o700)
    assert proc.returncode == 2 and "not writable" in proc.stderr
    assert not (locked / "run").exists()


def test_out_on_a_filesystem_that_refuses_folders_exits_2():
    proc = takeover("stress", "--out", "/proc/takeover-cannot-be-here/run", timeout=60)
    assert proc.returncode == 2 and "not writable" in proc.stderr, proc.stderr


def test_out_that_is_a_file_or_a_used_folder_exits_2(tmp_path):
    used = tmp_path / "used"
    used.mkdir()
    (used / "history.jsonl").write_text("")
    proc = takeover("stress", "--out", str(used), timeout=60)
    assert proc.returncode == 2 and "not empty" in proc.stderr
    afile = tmp_path / "afile"
    afile.write_text("x")
    proc = takeover("stress", "--out", str(afile), timeout=60)
    assert proc.returncode == 2 and "not a directory" in proc.stderr
    proc = takeover("stress", "--out", str(afile / "sub"), timeout=60)  # not a permission problem
    assert proc.returncode == 2 and "not a directory" in proc.stderr and "writable" not in proc.stderr, proc.stderr


def _interrupted_run(tmp_path: Path, sig: int):
    run_dir = tmp_path / "run"
    proc = start_takeover("stress", "--profile", "smoke", "--duration", "60", "--pause-rate", "4",
                          "--out", str(run_dir))  # fmt: skip
    try:
        assert wait_for_record(run_dir, lambda r: r["f"] == "pause" and r["type"] == "invoke"), "no pause began"
        os.killpg(proc.pid, sig)  # what a terminal's Ctrl-C (or a supervisor's SIGTERM) does
        out, err = proc.communicate(timeout=60)
        left = wait_no_stragglers(run_dir, timeout=15)
    finally:
        stop_and_reap(proc, run_dir)
    return run_dir, proc.returncode, out, err, left


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=["SIGINT", "SIGTERM", "SIGHUP"])
def test_interrupt_stops_faults_resumes_paused_and_leaves_nothing(tmp_path, sig):
    run_dir, code, out, err, left = _interrupted_run(tmp_path, sig)
    assert not left, [p.cmdline() for p in left]
    assert code == 130, out + err
    assert "Traceback" not in err
    recs = records(run_dir)
    marks = [r["value"] for r in recs if r["f"] == "run"]
    assert marks == ["start", "faults_stop", "interrupted"]
    pauses = [r for r in recs if r["f"] == "pause"]
    assert len([r for r in pauses if r["type"] == "invoke"]) == len([r for r in pauses if r["type"] == "ok"])
    spawned = {r["target"] for r in recs if r["f"] == "spawn"}
    assert spawned == {r["target"] for r in recs if r["f"] == "exit"}
    assert {r["value"] for r in recs if r["f"] == "exit"} <= {"0", "-9", "-15"}, "no worker died of the signal"
    snap = json.loads((run_dir / "snapshot.json").read_text())
    assert "tasks" in snap and snap["tasks"]
    assert (run_dir / "config.json").exists() and "reproduce with:" in out
    # the summary says what happened: stopped before the drain, so unfinished tasks and faults that
    # had no time to happen are no alarm
    assert "drain: interrupted before the drain" in out, out
    assert "NOT TERMINAL after the drain" not in out and "never injected" not in out, out


def test_sigkill_of_the_coordinator_leaves_no_process_behind(tmp_path):
    run_dir = tmp_path / "run"
    proc = start_takeover("stress", "--profile", "smoke", "--duration", "60", "--pause-rate", "4",
                          "--out", str(run_dir))  # fmt: skip
    try:
        assert wait_for_record(run_dir, lambda r: r["f"] == "pause" and r["type"] == "invoke"), "no pause began"
        children = stragglers(run_dir)
        assert len(children) >= 3, "workers and the service carry the run marker"
        proc.send_signal(signal.SIGKILL)  # the coordinator only: its children must notice on their own
        proc.communicate(timeout=30)
        left = wait_no_stragglers(run_dir, timeout=15)
        assert not left, [(p.pid, p.status(), p.cmdline()) for p in left]
        assert not any(psutil.pid_exists(c.pid) and c.status() != psutil.STATUS_ZOMBIE for c in children)
    finally:
        stop_and_reap(proc, run_dir)


@pytest.mark.slow
def test_queue_errors_are_recorded_and_the_run_goes_on(tmp_path):
    run_dir = tmp_path / "run"
    try:  # 60 tasks: enough finishes that some incarnation reaches every FINISH_EVERY-th, however many were killed
        proc = takeover("stress", "--profile", "smoke", "--queue", "flaky_queue:FlakyQueue", "--duration", "2",
                        "--tasks", "60", "--out", str(run_dir), timeout=150)  # fmt: skip
    finally:
        reap_stragglers(run_dir)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    recs = records(run_dir)
    locked = [r for r in recs if r["type"] == "info" and "database is locked" in r.get("error", "")]
    assert {r["f"] for r in locked} == {"claim", "finish"}
    exits = [r["value"] for r in recs if r["f"] == "exit"]
    assert set(exits) <= {"0", "-9"}, "no worker crashed on a queue error"
    snap = json.loads((run_dir / "snapshot.json").read_text())
    assert {row[1] for row in snap["tasks"]} <= {"done", "uncertain"}


@pytest.mark.slow
def test_a_queue_hung_in_snapshot_ends_the_run_at_the_drain_timeout(tmp_path):
    run_dir = tmp_path / "run"
    try:
        proc = takeover("stress", "--profile", "smoke", "--queue", "flaky_queue:HangingSnapshotQueue",
                        "--duration", "1", "--drain-timeout", "1", "--out", str(run_dir), timeout=60)  # fmt: skip
        left = wait_no_stragglers(run_dir, timeout=15)
    finally:
        reap_stragglers(run_dir)
    assert not left
    assert proc.returncode == 3, proc.stdout + proc.stderr  # inconclusive: no snapshot to judge
    assert "Traceback" not in proc.stderr
    snap = json.loads((run_dir / "snapshot.json").read_text())
    assert "snapshot()" in snap["error"] and "tasks" not in snap
    assert [r["value"] for r in records(run_dir) if r["f"] == "run"] == ["start", "faults_stop", "drain_end"]


@pytest.mark.slow
def test_ctrl_c_stops_a_run_whose_queue_hangs_in_snapshot(tmp_path):
    run_dir = tmp_path / "run"
    # No duplicate_register: it asks for a snapshot in the faulted phase, and its hung call would end
    # the drain at once (exit 3) before the Ctrl-C this test is about.
    proc = start_takeover("stress", "--profile", "smoke", "--queue", "flaky_queue:HangingSnapshotQueue",
                          "--duration", "1", "--drain-timeout", "600", "--duplicate-register-rate", "0",
                          "--out", str(run_dir))  # fmt: skip
    try:
        assert wait_for_record(run_dir, lambda r: r["f"] == "run" and r["value"] == "faults_stop")
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=30)  # before: hung in snapshot() for good
        left = wait_no_stragglers(run_dir, timeout=15)
    finally:
        stop_and_reap(proc, run_dir)
    assert not left
    assert proc.returncode == 130, out + err
    assert "Traceback" not in err
    assert "snapshot()" in json.loads((run_dir / "snapshot.json").read_text())["error"]
    assert "drain: interrupted during the drain after" in out, out
    assert [r["value"] for r in records(run_dir) if r["f"] == "run"] == ["start", "faults_stop", "interrupted"]


def test_a_profile_with_a_fault_rate_that_is_not_a_number_exits_2(tmp_path):
    profile = tmp_path / "p.toml"
    profile.write_text('[faults]\nkill = "a"\n')
    proc = takeover("stress", "--profile", str(profile), "--out", str(tmp_path / "run"), timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "kill" in lines[0] and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_a_service_that_dies_is_restarted_and_the_restart_is_recorded(tmp_path):
    run_dir = tmp_path / "run"
    proc = start_takeover("stress", "--profile", "smoke", "--no-faults", "--duration", "3", "--out", str(run_dir))
    try:
        assert wait_for_record(run_dir, lambda r: r["f"] == "run" and r["value"] == "start")
        # The one child with a socket bound to an address: a TCP listener, or the named end of the
        # Unix socket (workers' client ends are unnamed; psutil reports no LISTEN state for Unix sockets).
        listening = [c for c in psutil.Process(proc.pid).children()
                     if any(k.status == psutil.CONN_LISTEN or (k.family == socket.AF_UNIX and k.laddr)
                            for k in c.net_connections(kind="all"))]  # fmt: skip
        assert len(listening) == 1, "the service is the one child that listens"
        listening[0].send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=90)
        left = wait_no_stragglers(run_dir, timeout=15)
    finally:
        stop_and_reap(proc, run_dir)
    assert not left
    assert proc.returncode in (0, 1), out + err
    restarts = [r for r in records(run_dir) if r["f"] == "service"]
    assert len(restarts) == 1 and restarts[0]["value"] == "restart", restarts
    assert str(listening[0].pid) in restarts[0]["error"] and "-9" in restarts[0]["error"]
    assert restarts[0]["pid"] != listening[0].pid
    assert "1 service restarts" in out, out


def _only_fault(kind: str, rate: str) -> list[str]:
    """Options that switch every fault kind off but one (``--no-faults`` would win over it)."""
    argv = []
    for k in FAULT_KINDS:
        argv += [f"--{k.replace('_', '-')}-rate", rate if k == kind else "0"]
    return argv


@pytest.mark.slow
def test_a_second_ctrl_c_kills_at_once_and_says_so_in_the_exit_records(tmp_path):
    run_dir = tmp_path / "run"
    only_slow = _only_fault("slow", "1")
    # every task outlives a 2 s lease, so after the first Ctrl-C the workers are still busy for a while
    proc = start_takeover("stress", "--profile", "smoke", *only_slow, "--lease", "2", "--duration", "60",
                          "--out", str(run_dir))  # fmt: skip
    try:
        assert wait_for_record(run_dir, lambda r: r["f"] == "slow" and r["type"] == "invoke")
        os.killpg(proc.pid, signal.SIGINT)
        assert wait_for_record(run_dir, lambda r: r["f"] == "run" and r["value"] == "interrupted")
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        left = wait_no_stragglers(run_dir, timeout=15)
    finally:
        stop_and_reap(proc, run_dir)
    assert not left
    assert proc.returncode == 130, out + err
    exits = [r for r in records(run_dir) if r["f"] == "exit"]
    killed = [r for r in exits if r["value"] == "-9"]
    assert killed, exits
    assert all(r["detail"] == "second_signal" for r in killed), killed


@pytest.mark.nightly
@pytest.mark.slow
def test_a_paused_worker_killed_by_someone_else_has_no_pause_end(tmp_path):
    run_dir = tmp_path / "run"
    only_pause = _only_fault("pause", "3")
    proc = start_takeover("stress", "--profile", "smoke", *only_pause, "--lease", "3", "--duration", "60",
                          "--out", str(run_dir))  # fmt: skip
    try:  # a long_after_expiry pause lasts more than a lease (3 s): time enough to kill its worker
        assert wait_for_record(run_dir, lambda r: r["f"] == "pause" and r.get("detail") == "long_after_expiry")
        victim = next(r for r in records(run_dir) if r["f"] == "pause" and r.get("detail") == "long_after_expiry")
        os.kill(victim["pid"], signal.SIGKILL)
        assert wait_for_record(run_dir, lambda r: r["f"] == "pause" and r["type"] != "invoke"
                               and r["target"] == victim["target"], timeout=30)  # fmt: skip
        os.killpg(proc.pid, signal.SIGINT)
        proc.communicate(timeout=30)
    finally:
        stop_and_reap(proc, run_dir)
    end = next(r for r in records(run_dir) if r["f"] == "pause" and r["type"] != "invoke"
               and r["target"] == victim["target"])  # fmt: skip
    assert end["type"] == "info" and "died" in end["error"] and "value" not in end, end


@pytest.mark.slow
def test_ctrl_c_during_the_check_keeps_the_run_and_says_how_to_check_it(tmp_path):
    """Ctrl-C where the check starts. The command holds there (tests.helpers.hold_before_check) far longer
    than this test waits, so only the Ctrl-C can end it in time, and it cannot land after the check. Few
    tasks: the drain before the check is only a wait here."""
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "tests.helpers.hold_before_check", "600", "stress", "--profile",
                             "smoke", "--duration", "1", "--tasks", "20", "--out", str(run_dir)], cwd=REPO,
                            env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip
    held = []
    try:
        for line in proc.stderr:  # progress lines, then the hold's own line
            if HOLD_LINE in line:
                held.append(line)
                os.killpg(proc.pid, signal.SIGINT)
                break
        out, err = proc.communicate(timeout=120)
    finally:
        stop_and_reap(proc, run_dir)
    assert held, f"the command never reached the check (exit {proc.returncode})"
    assert proc.returncode == 130, err
    assert f"takeover check {run_dir}" in err and "Traceback" not in err, err
    assert (run_dir / "snapshot.json").exists() and "tasks" in json.loads((run_dir / "snapshot.json").read_text())


@pytest.mark.slow
@pytest.mark.nightly  # 7 s of start-up, then the drain and the check: 27 s at load 9
def test_the_drain_waits_for_workers_still_starting_instead_of_calling_the_tasks_lost(tmp_path):
    """Workers that take 7 s to open the queue miss the 1 s faulted phase and the first seconds of the
    drain: no task can finish before they are up, which is no fault of the queue. The drain's clock of
    no progress (1 s here) stands still until one is ready; then they finish every task: valid, no task
    lost (before, no_lost_task was violated for every task and the run exited 1)."""
    run_dir = tmp_path / "run"
    try:
        proc = takeover("stress", "--profile", "smoke", "--queue", "flaky_queue:SlowToStartQueue", "--no-faults",
                        "--duration", "1", "--tasks", "20", "--drain-timeout", "1", "--out", str(run_dir),
                        timeout=90)  # fmt: skip
    finally:
        reap_stragglers(run_dir)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["invariants"]["no_lost_task"]["valid"] is True
    assert summary["counts"]["final_states"] == {"done": 20}
    ops = [r for r in records(run_dir) if r["f"] in ("run", "claim") and r["type"] in ("info", "ok")]
    first_claim = next(i for i, r in enumerate(ops) if r["f"] == "claim")
    assert [r["value"] for r in ops[:first_claim]] == ["start", "faults_stop"]  # no claim before the drain
