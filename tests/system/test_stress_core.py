"""The library's one stress run (takeover._internal.stress_run.run_stress), called as a library: no command line.

Why: ``takeover stress``, the Python API and the multi-run commands all stand on this core; its result
is built in memory from the checker's summary, so it must say exactly what the run folder says, and a
caller that asked for no printing gets none. The command's own output is tested through the command
(tests/system/test_stress_run.py), the API's through the API (tests/unit/test_api.py,
tests/system/test_pytest_plugin.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers.processes import child_env, reap_stragglers

SCRIPT = textwrap.dedent(
    """
    import io, json, pickle, sys
    from takeover._internal.stress_run import resolve, run_stress

    cfg = resolve({"profile": "smoke", "duration": 1.0, "tasks": 12, "no_faults": True, "seed": 5})
    console = io.StringIO()
    result = run_stress(cfg, out=sys.argv[1], console=console)  # no progress stream: nothing on stderr
    print(json.dumps({"result": [result.exit_code, result.valid, result.command, result.summary],
                      "console": console.getvalue(), "command": cfg.command()}))
    """
)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_run_stress_returns_in_memory_what_the_run_folder_holds(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    try:
        proc = subprocess.run([sys.executable, "-c", SCRIPT, str(run_dir)], cwd=tmp_path, env=child_env(),
                              capture_output=True, text=True, timeout=110, check=False)  # fmt: skip
    finally:
        reap_stragglers(run_dir)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout)  # nothing else on stdout: the run printed only where it was asked to
    code, valid, command, summary = got["result"]
    assert (code, valid, command) == (0, True, got["command"])
    assert summary == json.loads((run_dir / "summary.json").read_text())
    console = got["console"]
    assert console.startswith(f"takeover stress: run folder {run_dir}\nreproduce with: {got['command']}\n")
    assert "VALID" in console and console.endswith(f"run folder: {run_dir}\nreproduce with: {got['command']}\n")
    assert not proc.stderr.strip(), "no progress stream given, none printed"
