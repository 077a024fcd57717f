"""A coordinator embedded in a user's script that cannot spawn says why, not something else.

Why: ``multiprocessing``'s spawn start method re-imports the user's main module in every child;
a script without the ``if __name__ == "__main__":`` guard then makes each child try to run a
coordinator of its own, whose ``start()`` of the service fails with Python's own explanation.
The coordinator's clean-up used to join that never-started process and raise an AssertionError
on top, hiding the explanation under a second, meaningless traceback.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.helpers.processes import child_env

SCRIPT = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    from takeover._internal.config import RunConfig, TaskTime
    from takeover._internal.options import FAULT_KINDS
    from takeover._internal.run.coordinator import Coordinator
    from takeover.workloads.worker import worker_main

    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("child-run")
    out.mkdir(exist_ok=True)
    cfg = RunConfig(
        profile="embedded", workers=1, tasks=3, duration=0.5, lease=1.0, seed=1, out=str(out),
        task_time=TaskTime(dist="fixed", mean=0.0, spread=0.0, max=0.0), local_step=0.0,
        poll=0.01, client_timeout=0.5, drain_timeout=0.5, faults={k: 0.0 for k in FAULT_KINDS},
    ).validate()
    Coordinator(cfg, out, worker=worker_main).run()  # no __main__ guard: the mistake this test is about
    """
)


@pytest.mark.timeout(90)
def test_an_unguarded_script_shows_pythons_explanation_alone(tmp_path) -> None:
    script = tmp_path / "embed.py"
    script.write_text(SCRIPT)
    proc = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "run")],
        cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=80, check=False,
    )  # fmt: skip
    assert "bootstrapping phase" in proc.stderr  # Python's own explanation reached the user
    assert "can only join a started process" not in proc.stderr, proc.stderr[-2000:]
