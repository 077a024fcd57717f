"""queue4 (the 4-process ceiling measurement) leaves no process behind when its parent dies.

The measuring processes are the bench's children; if ``takeover bench`` is SIGKILLed (a CI
timeout, the OOM killer, a second terminal's kill -9) nothing in the parent runs, so the children
themselves must notice. Without that they kept claiming for the whole window, or sat at the
start barrier for a minute, holding the queue file open.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

_PARENT = r"""
import sys
from takeover.benchmarks.queue_raw import FreshQueues
from takeover.benchmarks.queue4 import queue4_rate
fresh = FreshQueues(400_000)  # about a minute of claims: they would outlive the check
path = fresh.path()
print("measuring", flush=True)
try:
    queue4_rate(path, 300.0, echo=bool(int(sys.argv[1])))
finally:
    fresh.cleanup()
"""


@pytest.mark.slow
@pytest.mark.parametrize("echo", [False, True], ids=["queue", "queue+echo-peer"])
def test_measuring_processes_die_with_a_killed_parent(tmp_path, echo: bool) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # the queue file of a killed parent stays in tmp_path
    expected = 5 if echo else 4  # with the floor's echo peer, a fifth process
    parent = subprocess.Popen([sys.executable, "-c", _PARENT, str(int(echo))], stdout=subprocess.PIPE, text=True,
                              cwd=tmp_path, env=env)  # fmt: skip
    seen: dict[int, psutil.Process] = {}
    try:
        assert parent.stdout.readline().strip() == "measuring"
        me = psutil.Process(parent.pid)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                kids = [k for k in me.children(recursive=True) if "spawn_main" in " ".join(k.cmdline())]
            except psutil.Error:
                kids = []
            for k in kids:
                seen[k.pid] = k
            if len(seen) >= expected:
                break
            time.sleep(0.01)
        assert len(seen) == expected, f"the {expected} measuring processes did not start: {sorted(seen)}"
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        _, alive = psutil.wait_procs(list(seen.values()), timeout=20)
        assert not alive, f"left behind after the parent died: {[p.pid for p in alive]}"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        for p in seen.values():
            try:
                p.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(list(seen.values()), timeout=10)
