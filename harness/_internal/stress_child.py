"""``takeover.stress()``'s run in a child process: checked here once, run there, its result handed back.

Why a module of its own: the API (:func:`takeover.api.stress`) only reads its keywords as the command's
options and hands them here, so the way from a caller's ``stress(queue=...)`` to the run's workers passes
through the API once. Why a child at all (see :mod:`takeover.api`): a run installs signal handlers, spawns
workers that import the queue by name, and must be reaped whatever happens to its caller. In a session
of its own the run is out of reach of the caller's terminal; when the caller is interrupted (Ctrl-C, or
pytest-timeout's exception) the run gets a terminal's Ctrl-C (the clean stop), then SIGKILL for whatever
is left after :data:`STOP_GRACE`; should the caller die outright, the kernel kills the run
(:mod:`takeover._internal.lifeline`). Everything the run refuses is refused in the caller, before the child
exists (:func:`takeover._internal.stress_run.checked`); the child checks nothing again.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import pickle
import signal
import sys
import tempfile
from importlib.machinery import PathFinder
from pathlib import Path
from typing import Any

from takeover._internal import db, locate, store
from takeover._internal.child_run import ChildRun, Stop
from takeover._internal.config import RunConfig
from takeover._internal.lifeline import die_with_parent
from takeover._internal.options import db_given
from takeover._internal.stress_run import checked, resolve, run_checked
from takeover.errors import UsageError, under_error_contract
from takeover.run_result import RunResult

# How long a stopped run may take to end cleanly (its drain is cut short; the check of what was recorded
# runs) before it is SIGKILLed.
STOP_GRACE = 15.0
# The run's own entry point: the library's stress run, after arranging to die with this process.
_CHILD = "import sys; from takeover._internal.stress_child import child_main; sys.exit(child_main(sys.argv[1:]))"


def stress_in_child(args: argparse.Namespace) -> RunResult:
    """The run ``takeover stress`` would make of ``args`` (the command's options, by dest), checked in this
    process and run in a child; returns the checked run, raises a one-line UsageError on bad input."""
    cfg = resolve(args)  # every value checked before anything starts
    # Everything else the run refuses is refused here too, in this process, before the run's child exists; the
    # child checks nothing again. The database is served here, for the child too: a private server is started
    # once (the child is handed its host, takeover._internal.db.attached) and is gone when this returns.
    with checked(cfg, database=db_given(args), out=args.out, keep_db=args.keep_db, reconcile=args.reconcile) as host:
        run = {"reconcile": args.reconcile, "fail_on_duplicates": args.fail_on_duplicates,
               "max_duplicates_per_1000": args.max_duplicates_per_1000}
        return run_in_child(args.queue, cfg, host, run, args.out)


def run_in_child(spec: str, cfg: RunConfig, host: db.Host, run: dict[str, Any], out: str | None) -> RunResult:
    """The library's stress run (takeover._internal.stress_run.run_checked) in a child process (see the module's
    docstring). A file of this process' hands the child the database host and hands back the RunResult it
    built in memory."""
    run_dir = store.create(out).absolute()
    env = dict(os.environ)
    extra = import_path(spec)
    if extra:
        env["PYTHONPATH"] = os.pathsep.join([*extra, *filter(None, [env.get("PYTHONPATH")])])
    request = json.dumps({"config": cfg.to_dict(), "out": str(run_dir), **run})
    fd, handed = tempfile.mkstemp(prefix="takeover-result-")  # this user's alone: the host holds a password
    os.close(fd)
    try:
        Path(handed).write_bytes(pickle.dumps(host))
        code, stdout, stderr = run_child([handed, request], env, run_dir)
        if code == 2:
            lines = [line for line in stderr.splitlines() if line.startswith("takeover: error: ")]
            raise UsageError(lines[-1].removeprefix("takeover: error: ") if lines else stderr.strip() or "bad input")
        data = Path(handed).read_bytes()
    finally:
        os.unlink(handed)
    if not data:  # the child ended before its result (killed, or a crash): what its folder holds
        return RunResult.read(run_dir, code, stdout)
    return dataclasses.replace(pickle.loads(data), output=stdout)  # our own child's, from our own file


def run_child(argv: list[str], env: dict[str, str], run_dir: Path) -> tuple[int, str, str]:
    """Run :func:`child_main` in a child process of its own session (takeover._internal.child_run); its output is
    passed through to this process's and kept. Whatever ends the wait early (an interrupt, a test's timeout) stops the
    run first: a terminal's Ctrl-C, SIGKILL after :data:`STOP_GRACE`, then any process of the run still there."""
    run = ChildRun([sys.executable, "-c", _CHILD, str(os.getpid()), *argv], Stop(signal.SIGINT, STOP_GRACE, run_dir),
                   env=env, echo=True, session=True)
    run.wait()
    return int(run.returncode or 0), run.stdout, run.stderr


def child_main(argv: list[str]) -> int:
    """The run's process: die with the caller (a caller that is killed cannot stop its run), then the
    library's stress run on the host its caller served and checked, printing as ``takeover stress`` does;
    its RunResult goes to the file the caller named. Bad input is one line and exit 2, as on the command line."""
    die_with_parent(int(argv[0]))
    handed, request = Path(argv[1]), json.loads(argv[2])
    host = pickle.loads(handed.read_bytes())  # our own caller's, from its own file
    handed.write_bytes(b"")  # from here on, empty until the result: a run that dies leaves no result

    def body() -> int:
        cfg = RunConfig.from_dict(request.pop("config"))
        where = locate.locate(cfg.queue, cfg.profile)  # as a fresh process finds the queue: the reproduce line's
        cfg = dataclasses.replace(cfg, workdir=where.workdir, pythonpath=where.pythonpath)
        with db.attached(host):
            result = run_checked(cfg, host, Path(request.pop("out")), console=sys.stdout, progress=sys.stderr,
                                 **request)  # fmt: skip
        handed.write_bytes(pickle.dumps(result))
        return result.exit_code

    return under_error_contract(body)


def import_path(spec: str) -> list[str]:
    """Folders this process imports the queue from that a fresh ``takeover`` process would not search:
    they go on the run's PYTHONPATH (its reproduce line then names them)."""
    module = spec.partition(":")[0]
    root = locate.find_root(spec)  # where a fresh process looks: the current folder, then the path
    loaded = sys.modules.get(module)
    if root is None and loaded is not None and getattr(loaded, "__file__", None) and not hooked(spec):
        # Imported here from a folder that is not on the path (pytest puts a test's folder there, or
        # imports it by file): that folder goes on the run's path, if the module's name leads to its file.
        root = loaded_root(loaded, module)
        if root is None:
            raise UsageError(f"queue module {module!r} was imported under a name that does not match where its file "
                             f"is ({loaded.__file__}), so worker processes cannot import it by that name")
    if root is None or os.path.realpath(root) == os.path.realpath(os.getcwd()) or locate.installed(root):
        return []  # installed, or in the current folder, which the command searches first
    return [root]


def hooked(spec: str) -> bool:
    """Whether an import hook other than the path's finds the queue's top-level module (an editable
    install's finder does): a fresh process has the same hook, so no folder is needed."""
    top = locate.top_level(spec)
    for finder in sys.meta_path:
        if top is None or finder is PathFinder or not hasattr(finder, "find_spec"):
            continue
        with contextlib.suppress(Exception):
            if finder.find_spec(top, None) is not None and top not in sys.builtin_module_names:
                return True
    return False


def loaded_root(module: Any, name: str) -> str | None:
    """The folder to put on the path so that ``import name`` finds this module's file again."""
    file = getattr(module, "__file__", None)
    if not file:
        return None
    path = Path(file).resolve()
    parts = name.split(".")
    depth = len(parts) - 1 + (path.name == "__init__.py")
    root = path.parents[depth]
    expected = root.joinpath(*parts)
    if path not in (expected.with_suffix(path.suffix), expected / "__init__.py"):
        return None  # imported under a name its file's place does not give (e.g. pytest's importlib mode)
    return str(root)


