"""Every ending a command can meet leaves nothing behind (issue 34, item 4): SIGTERM is Ctrl-C for every
command, a SIGKILL leaves no scratch folder (takeover._internal.scratch's janitor removes them), and Ctrl-C stops a
run while its workers are still starting.

Each test runs ``takeover`` as a real process with its own temporary folder (``TMPDIR``), sends it a real
signal, and looks at what is left: the exit code, stderr, the folder, the processes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.processes import REPO, child_env, records, stop_and_reap, wait_no_stragglers

ADAPTER = f"exec:{sys.executable} tests/fixtures/adapters/pyadapter.py"


def _default_stop_signals() -> None:
    """In the child before it runs takeover: SIGTERM and SIGHUP at their defaults, as a terminal's session
    starts. Inherited as ignored (the suite run under ``nohup``, as a CI job may be), SIGHUP stays ignored by
    design (takeover.cli), and the SIGHUP test waited 100 s for an explore that never heard it."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def _start(tmp: Path, *args: str) -> subprocess.Popen:
    """``takeover ARGS`` in a session of its own (a signal to its group is what a terminal sends), with its
    temporary folder ``tmp``."""
    tmp.mkdir(exist_ok=True)
    return subprocess.Popen([sys.executable, "-m", "takeover", *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**child_env(), "TMPDIR": str(tmp)},
                            start_new_session=True, preexec_fn=_default_stop_signals)  # fmt: skip


def _wait_for(pred, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return False


def _left(tmp: Path, timeout: float = 5.0) -> list[str]:
    """What is left in ``tmp`` once the janitor had ``timeout`` seconds to act."""
    _wait_for(lambda: not any(tmp.iterdir()), timeout)
    return sorted(p.name for p in tmp.iterdir())


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_ends_explore_as_ctrl_c_does(tmp_path, sig):
    """explore exited 143 in silence on SIGTERM and left its takeover-explore-* folders."""
    tmp = tmp_path / "tmp"
    proc = _start(tmp, "explore", "--seconds", "120")
    try:
        assert _wait_for(lambda: any(p.name.startswith("takeover-explore-") for p in tmp.iterdir()), 120)
        time.sleep(1.0)  # well inside its examples
        os.killpg(proc.pid, sig)
        _, err = proc.communicate(timeout=100)
    finally:
        stop_and_reap(proc)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "takeover: interrupted" and "Traceback" not in err, err
    assert _left(tmp) == []


@pytest.mark.parametrize(("args", "prefix"), [
    (("explore", "--seconds", "120"), "takeover-explore-"),
    # a silent adapter keeps the check before the run waiting for its hello (60 s)
    (("stress", "--profile", "smoke", "--queue", f"{ADAPTER} silent"), "takeover-check-"),
])
def test_sigkill_leaves_no_scratch_folder(tmp_path, args, prefix):
    """A SIGKILLed explore or stress left takeover-explore-* and takeover-check-* folders."""
    tmp = tmp_path / "tmp"
    proc = _start(tmp, *args, "--out", str(tmp_path / "out")) if args[0] == "stress" else _start(tmp, *args)
    try:
        assert _wait_for(lambda: any(p.name.startswith(prefix) for p in tmp.iterdir()), 120)
        time.sleep(0.5)
        proc.kill()
        proc.wait(10)
    finally:
        stop_and_reap(proc)
    assert _left(tmp) == []


def test_ctrl_c_while_many_workers_start_stops_the_run(tmp_path):
    """issue 34: with --workers 100000 the coordinator went on spawning after Ctrl-C. The bound is the
    machine's now (tests/unit/test_options.py); at that bound a Ctrl-C as the first workers start stops it."""
    from takeover._internal.run_option import max_workers

    out = tmp_path / "run"
    proc = _start(tmp_path / "tmp", "stress", "--profile", "smoke", "--workers", str(max_workers()), "--duration",
                  "30", "--out", str(out))
    try:
        assert _wait_for(lambda: sum(r.get("f") == "spawn" for r in records(out)) >= 2, 120), proc.stderr
        os.killpg(proc.pid, signal.SIGINT)
        started = time.monotonic()
        _, err = proc.communicate(timeout=100)
        took = time.monotonic() - started
    finally:
        stop_and_reap(proc, out)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    spawned = sum(r.get("f") == "spawn" for r in records(out))
    assert spawned < max_workers(), f"Ctrl-C did not stop the start-up: {spawned} workers started ({took:.1f} s)"
    assert wait_no_stragglers(out) == []


def test_sigkill_while_workers_start_leaves_no_traceback_and_no_process(tmp_path):
    """issue 34: a SIGKILL of takeover while its workers started left ``EOFError: Ran out of input`` tracebacks
    of the workers that had not read their start yet (takeover._internal.lifeline.quiet_spawn), on the terminal. Their
    stderr is a file here, which they keep writing to after takeover is gone."""
    from takeover._internal.run_option import max_workers

    out, err_file = tmp_path / "run", tmp_path / "stderr.txt"
    (tmp_path / "tmp").mkdir()
    with err_file.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "takeover", "stress", "--profile", "smoke", "--workers",
                                 str(max_workers()), "--duration", "30", "--out", str(out)], cwd=REPO,
                                stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
                                env={**child_env(), "TMPDIR": str(tmp_path / "tmp")})  # fmt: skip
    try:
        assert _wait_for(lambda: sum(r.get("f") == "spawn" for r in records(out)) >= 8, 120)
        proc.kill()
        proc.wait(10)
        assert wait_no_stragglers(out) == []
    finally:
        stop_and_reap(proc, out)
    time.sleep(1.0)  # a child that met the end of its start writes within milliseconds
    assert "Traceback" not in err_file.read_text(), err_file.read_text()[-3000:]
    assert _left(tmp_path / "tmp") == []


LOST_INTERRUPT = """
import time
from takeover import cli

class Lands:  # where a Ctrl-C can land and be lost: a __del__ (or a gc callback, as Hypothesis's under explore)
    def __del__(self):
        raise KeyboardInterrupt("landed in __del__")

with cli._stop_signals_as_ctrl_c():
    try:
        Lands()
        for _ in range(300):
            time.sleep(0.01)
        print("went on as if never interrupted")
    except KeyboardInterrupt:
        print("interrupted")
"""


def test_an_interrupt_that_lands_in_a_del_is_delivered_again():
    """Seen under load: a SIGHUP made Ctrl-C landed in Hypothesis's gc callback during explore; Python printed
    "Exception ignored in ..." with a traceback and explore went on. takeover delivers it again instead."""
    result = subprocess.run([sys.executable, "-c", LOST_INTERRUPT], cwd=REPO, capture_output=True, text=True,
                            env=child_env(), timeout=60)  # fmt: skip
    assert result.stdout.strip() == "interrupted", result.stdout + result.stderr
    assert "Exception ignored" not in result.stderr and "Traceback" not in result.stderr, result.stderr


def test_temp_root_holds_every_temporary_folder_of_the_block_and_children_s(tmp_path, monkeypatch):
    """takeover._internal.scratch.temp_root (``takeover bench``'s): tempfile's folders in this process and TMPDIR
    in its children are under the one scratch folder the janitor knows, all removed at the block's end,
    an exception's included, and tempfile's folder and TMPDIR given back."""
    import tempfile

    from takeover._internal.scratch import temp_root

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    with pytest.raises(RuntimeError), temp_root("takeover-test-root-") as root:
        assert Path(root).parent == tmp_path and Path(tempfile.mkdtemp(prefix="inner-")).parent == Path(root)
        child = subprocess.run([sys.executable, "-c", "import tempfile; print(tempfile.mkdtemp(prefix='kid-'))"],
                               capture_output=True, text=True, check=True)  # fmt: skip
        assert Path(child.stdout.strip()).parent == Path(root)
        raise RuntimeError("an ending the block sees")
    assert list(tmp_path.iterdir()) == []
    assert tempfile.tempdir == str(tmp_path) and os.environ["TMPDIR"] == str(tmp_path)
