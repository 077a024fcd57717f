"""``takeover.stress()``'s run in a child process: checked here once, run there, its result handed back.

Why a module of its own: the API (:func:`takeover.api.stress`) only reads its keywords as the command's
options and hands them here, so the way from a caller's ``stress(queue=...)`` to the run's workers passes
through the API once. Why a child at all (see :mod:`takeover.api`): a run installs signal handlers, spawns
workers that import the queue by name, and must be reaped whatever happens to its caller. In a session
of its own the run is out of reach of the caller's terminal; when the caller is interrupted (Ctrl-C, or
pytest-timeout's exception) the run gets a terminal's Ctrl-C (the clean stop), then SIGKILL for whatever
is left after :data:`STOP_GRACE`; should the caller die outright, the kernel kills the run
(:mod:`takeover._internal.lifeline`). Everything the run refuses is refused in the caller, before the child
exists (:func:`takeover._internal.stress_run.checked`), and the queue is located there, where the user's
code imported it (:mod:`takeover._internal.locate`): the child is handed one :class:`Request`, the checked
config with its location included, and checks and locates nothing again.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import pickle
import signal
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from takeover._internal import db, store
from takeover._internal.child_run import ChildRun, Stop
from takeover._internal.config import RunConfig
from takeover._internal.lifeline import die_with_parent
from takeover._internal.stress_run import checked, resolve, run_checked
from takeover.errors import UsageError, under_error_contract
from takeover.run_result import RunResult

# How long a stopped run may take to end cleanly (its drain is cut short; the check of what was recorded
# runs) before it is SIGKILLed.
STOP_GRACE = 15.0
# The run's own entry point: the library's stress run, after arranging to die with this process.
_CHILD = "import sys; from takeover._internal.stress_child import child_main; sys.exit(child_main(sys.argv[1:]))"


@dataclass(frozen=True)
class Request:
    """What the child runs, prepared and checked in the caller: the config (where the queue was found
    included: the run's reproduce line), the database host the caller serves, the run folder it made, and
    what ``takeover stress`` does around the run (the reconciliation, the duplicate gate)."""

    cfg: RunConfig
    host: db.Host
    run_dir: Path
    reconcile: bool
    fail_on_duplicates: bool
    max_duplicates_per_1000: float | None


def stress_in_child(args: argparse.Namespace) -> RunResult:
    """The run ``takeover stress`` would make of ``args`` (the command's options, by dest), checked in this
    process and run in a child; returns the checked run, raises a one-line UsageError on bad input."""
    cfg = resolve(args)  # every value checked (``--db`` too), the queue located, before anything starts
    # Everything else the run refuses is refused here too, in this process, before the run's child exists; the
    # child checks nothing again. The database is served here, for the child too: a private server is started
    # once (the child is handed its host, takeover._internal.db.attached) and is gone when this returns.
    with checked(cfg, database=args.db, out=args.out, keep_db=args.keep_db, reconcile=args.reconcile) as host:
        return run_in_child(Request(cfg, host, store.create(args.out).absolute(), args.reconcile,
                                    args.fail_on_duplicates, args.max_duplicates_per_1000))


def run_in_child(request: Request) -> RunResult:
    """The library's stress run (takeover._internal.stress_run.run_checked) in a child process of its own
    session (takeover._internal.child_run), on the PYTHONPATH the queue was located with; its output is passed
    through to this process's and kept. A file of this process' hands the child the request and hands back
    the RunResult it built in memory. Whatever ends the wait early (an interrupt, a test's timeout) stops the
    run first: a terminal's Ctrl-C, SIGKILL after :data:`STOP_GRACE`, then any process of the run still there."""
    env = dict(os.environ)
    if request.cfg.pythonpath:  # folders a fresh process would not search (takeover._internal.locate)
        env["PYTHONPATH"] = os.pathsep.join([*request.cfg.pythonpath, *filter(None, [env.get("PYTHONPATH")])])
    fd, handed = tempfile.mkstemp(prefix="takeover-result-")  # this user's alone: the host holds a password
    os.close(fd)
    try:
        Path(handed).write_bytes(pickle.dumps(request))
        run = ChildRun([sys.executable, "-c", _CHILD, str(os.getpid()), handed],
                       Stop(signal.SIGINT, STOP_GRACE, request.run_dir), env=env, echo=True, session=True)
        run.wait()
        code = int(run.returncode or 0)
        if code == 2:
            lines = [line for line in run.stderr.splitlines() if line.startswith("takeover: error: ")]
            raise UsageError(lines[-1].removeprefix("takeover: error: ") if lines else run.stderr.strip() or
                             "bad input")  # fmt: skip
        data = Path(handed).read_bytes()
    finally:
        os.unlink(handed)
    if not data:  # the child ended before its result (killed, or a crash): what its folder holds
        return RunResult.read(request.run_dir, code, run.stdout)
    return dataclasses.replace(pickle.loads(data), output=run.stdout)  # our own child's, from our own file


def child_main(argv: list[str]) -> int:
    """The run's process: die with the caller (a caller that is killed cannot stop its run), then the
    library's stress run of the request its caller prepared, printing as ``takeover stress`` does; its
    RunResult goes to the file the caller named. Bad input is one line and exit 2, as on the command line."""
    die_with_parent(int(argv[0]))
    handed = Path(argv[1])
    request: Request = pickle.loads(handed.read_bytes())  # our own caller's, from its own file
    handed.write_bytes(b"")  # from here on, empty until the result: a run that dies leaves no result

    def body() -> int:
        with db.attached(request.host):
            result = run_checked(request.cfg, request.host, request.run_dir, reconcile=request.reconcile,
                                 fail_on_duplicates=request.fail_on_duplicates,
                                 max_duplicates_per_1000=request.max_duplicates_per_1000, console=sys.stdout,
                                 progress=sys.stderr)  # fmt: skip
        handed.write_bytes(pickle.dumps(result))
        return result.exit_code

    return under_error_contract(body)
