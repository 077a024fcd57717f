"""What a dask worker runs for one run: the run's command line in a subprocess, its folder back compressed.

Why a subprocess and a scratch folder: a run is a process tree of its own (coordinator, workers, service)
that takes signals and must be reaped; run in the dask worker's own process it would share its signal
handlers and threads. The subprocess is ``takeover stress ...``, the very line the run's reproduce line
says, with ``--out`` in a fresh scratch folder that is removed afterwards: the worker keeps nothing, and
needs nothing from the machine that asked but takeover installed (and the queue importable).

The run is stopped, and its whole tree reaped, when the task is no longer wanted: the command cancelled it
(Ctrl-C), or the client that asked went away (the scheduler then releases its tasks). The child also dies
with the dask worker (``PR_SET_PDEATHSIG``, takeover._internal.lifeline), so a worker killed mid-run leaves no
run behind. Each start and end is logged as a dask event (:data:`TOPIC`): the command counts the starts of a
run (a second start is the rerun after a lost worker) and shows what runs where.
"""

from __future__ import annotations

import io
import os
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from takeover._internal.child_run import ChildRun, Stop, takeover_argv
from takeover._internal.tarballs import extract_within

TOPIC = "takeover-fanout"
STOP_GRACE = 2.0  # seconds a cancelled run gets to stop its own tree (SIGTERM) before it is killed
WANTED = ("executing", "long-running")
_ACTIVE: set[str] = set()  # the task keys whose run is under way in this worker, until their scratch is gone


def active(prefix: str) -> int:
    """How many runs whose key starts with ``prefix`` this worker has under way (``Client.run`` asks each
    worker, on its event loop, while Ctrl-C waits for the cancelled runs to be gone)."""
    return sum(1 for key in list(_ACTIVE) if key.startswith(prefix))


def pack(folder: Path) -> bytes:
    """The folder as a gzip-compressed tar, its entries relative to it."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6) as tar:
        for path in sorted(folder.rglob("*")):
            tar.add(path, arcname=str(path.relative_to(folder)), recursive=False)
    return buf.getvalue()


def unpack(archive: bytes, folder: Path) -> None:
    """Extract :func:`pack`'s archive into ``folder`` (created): a plain tree of files, nothing outside it."""
    folder.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        extract_within(tar, folder)


def _run_environ() -> dict[str, str]:
    """This worker's environment less what a dask nanny set for its own worker process (one BLAS thread,
    an eager malloc trim: ``distributed.nanny.pre-spawn-environ``), so the run sees the environment a run
    started from a shell sees, not one tuned for a dask worker's numeric tasks."""
    env = dict(os.environ)
    try:
        import dask

        nanny = dask.config.get("distributed.nanny.pre-spawn-environ", {}) or {}
    except ImportError:
        nanny = {}
    for name, value in nanny.items():
        if env.get(name) == str(value):
            del env[name]
    return env


def relocate(folder: Path) -> None:
    """Point a gathered run's ``config.json`` at the folder it is stored in now, as a local run's is (it
    named the scratch folder it ran in on the worker, gone since)."""
    import json

    path = folder / "config.json"
    if path.is_file():
        config = json.loads(path.read_text())
        if "out" in config:
            config["out"] = str(folder)
            path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def run_remote(argv: list[str], pythonpath: list[str]) -> dict[str, Any]:
    """Run ``takeover ARGV --out SCRATCH/run`` here; return its exit code, wall time and packed run folder."""
    from distributed import get_worker

    worker = get_worker()
    key = worker.get_current_task()
    worker.log_event(TOPIC, {"event": "start", "key": str(key), "worker": worker.address})
    _ACTIVE.add(str(key))
    scratch = Path(tempfile.mkdtemp(prefix="takeover-fanout-"))
    started = time.monotonic()
    try:
        out = scratch / "run"
        env = _run_environ()
        (scratch / "tmp").mkdir()
        env["TMPDIR"] = str(scratch / "tmp")  # whatever the run leaves in temp goes with the scratch folder
        paths = [p for p in pythonpath if Path(p).is_dir()] + [p for p in [env.get("PYTHONPATH")] if p]
        if paths:
            env["PYTHONPATH"] = os.pathsep.join(paths)
        with open(scratch / "stderr.txt", "w+") as err:
            run = ChildRun(takeover_argv([*argv, "--out", str(out)]),
                           Stop(signal.SIGTERM, STOP_GRACE), cwd=scratch, env=env, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=err)  # fmt: skip
            cancelled = run.wait(wanted=lambda: _wanted(worker, key))
            err.seek(0)
            tail = err.read()[-2000:]
        result: dict[str, Any] = {"exit_code": run.returncode, "wall_s": round(time.monotonic() - started, 3),
                                  "worker": worker.address, "cancelled": cancelled, "stderr": tail}  # fmt: skip
        if not cancelled and out.is_dir():
            result["archive"] = pack(out)
        return result
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        _ACTIVE.discard(str(key))
        worker.log_event(TOPIC, {"event": "end", "key": str(key), "worker": worker.address})


def _wanted(worker: Any, key: Any) -> bool:
    """Whether the task is still wanted: the command did not cancel it and its client is still there."""
    ts = worker.state.tasks.get(key)
    return ts is not None and ts.state in WANTED
