"""The runner (``takeover._internal.run``) stands apart from what it runs and from what judges the run.

Why: the coordinator used to import the workload inside a function, and the progress display
imported the coordinator, so the runner could not be reused with another worker and its parts could
not be read alone. Now the caller hands the coordinator a worker entry point. These tests keep it
that way: the package's source never names the workload, the checker or the reports (a function-local
import included), importing all of it loads none of them, the progress model loads without the
coordinator, and a run really starts the entry point it was given. The checks that read the
source, and need no process, are the import-linter contracts in pyproject.toml (`make lint`).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers.processes import child_env, reap_stragglers, records

# What the runner must never load: the workload it runs, and everything that reads a run folder.
FOREIGN = ("takeover.workloads.", "takeover._internal.checker", "takeover.reports", "takeover._internal.commands",
           "takeover._internal.soak", "takeover._internal.sweep")  # fmt: skip


def test_importing_the_whole_run_package_loads_no_workload_checker_or_reports() -> None:
    code = textwrap.dedent(
        """
        import importlib, json, pkgutil, sys
        import takeover._internal.run as run
        for info in pkgutil.iter_modules(run.__path__):
            importlib.import_module(f"takeover._internal.run.{info.name}")
        print(json.dumps(sorted(m for m in sys.modules if m.startswith("takeover"))))
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True,
                          env=child_env())  # fmt: skip
    loaded = json.loads(proc.stdout)
    assert "takeover._internal.run.supervision" in loaded and "takeover._internal.run.coordinator" in loaded
    assert not [m for m in loaded if m.startswith(FOREIGN)]


# A worker entry point of the script's own: it records that it ran, then waits to be stopped.


SCRIPT = textwrap.dedent(
    """
    import sys
    import time
    from pathlib import Path

    from takeover._internal.config import RunConfig, TaskTime
    from takeover._internal.history import HistoryWriter
    from takeover._internal.options import FAULT_KINDS
    from takeover._internal.run.coordinator import Coordinator


    def marker_worker(spec, board):
        hist = HistoryWriter(spec.history_path, spec.process)
        hist.write("info", "open", worker=f"w{spec.slot}", error="the worker the caller passed in")
        board.publish(spec.slot, "idle", time.time())  # ready, as a worker says once its queue is open
        while not board.stop_requested():
            time.sleep(0.01)


    if __name__ == "__main__":
        out = Path(sys.argv[1])
        out.mkdir()
        cfg = RunConfig(
            profile="passed-in", workers=2, tasks=1, duration=0.3, lease=1.0, seed=1, out=str(out),
            task_time=TaskTime(dist="fixed", mean=0.0, spread=0.0, max=0.0), local_step=0.0,
            poll=0.01, client_timeout=0.5, drain_timeout=0.5, faults={k: 0.0 for k in FAULT_KINDS},
        ).validate()
        result = Coordinator(cfg, out, worker=marker_worker).run()
        print(result.spawned, result.crashes, result.interrupted)
    """
)


@pytest.mark.timeout(90)
def test_the_coordinator_runs_the_worker_entry_point_it_is_given(tmp_path: Path) -> None:
    script = tmp_path / "passed_in.py"
    script.write_text(SCRIPT)
    run_dir = tmp_path / "run"
    try:
        proc = subprocess.run([sys.executable, str(script), str(run_dir)], cwd=tmp_path, capture_output=True,
                              text=True, timeout=80, check=False, env=child_env())  # fmt: skip
    finally:
        reap_stragglers(run_dir)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["2", "0", "False"]  # two incarnations, neither crashed
    recs = records(run_dir)
    marks = [r for r in recs if r["f"] == "open" and r.get("error") == "the worker the caller passed in"]
    assert sorted((r["process"], r["worker"]) for r in marks) == [(1, "w0"), (2, "w1")]
    exits = [r for r in recs if r["f"] == "exit"]
    assert sorted((r["target"], r["value"], r["detail"]) for r in exits) == [(1, "0", "stopped"), (2, "0", "stopped")]
