"""A run in a child process: started, its output streamed, waited for, stopped and its tree reaped.

Why one module: the Python API (takeover.api), the fan-out's dask workers (takeover._internal.fanout.remote) and the
commands of many runs (selftest, the benchmarks) each run ``takeover stress`` in a child of their own, so a
run that hangs or crashes cannot take its caller down with it. Each must stop the run whatever ends the wait
(an interrupt, a test's timeout, a cancelled task) and leave no process of it behind; the ways of stopping
differ only in how polite the first signal is (:class:`Stop`), so there is one :class:`ChildRun` that does
it all and one :func:`stop` that every ending goes through.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import psutil

from takeover._internal import store
from takeover.errors import UsageError
from takeover.exit_codes import ExitCode

if TYPE_CHECKING:
    from takeover.summary_types import Summary

POLL = 0.25  # seconds between looks at the child (and at whether it is still wanted)
_LIVE: set[ChildRun] = set()  # every run of this process still being waited for (stop_all)
_LIVE_LOCK = threading.Lock()
# ``takeover ARGV...`` as a child that dies with its caller (takeover._internal.lifeline): argv[1] is the caller's pid.
_TAKEOVER = ("import sys; from takeover._internal.lifeline import die_with_parent; die_with_parent(int(sys.argv[1])); "
             "from takeover.cli import main; sys.exit(main(sys.argv[2:]))")


@dataclass(frozen=True)
class Stop:
    """How a child run is stopped: ``signal`` first (to its process group when it has a session of its own),
    ``grace`` seconds to end on its own, then SIGKILL for its group (else its tree: :func:`stop`); with
    ``run_dir``, last a sweep of every process that carries that run folder in its environment
    (takeover._internal.lifeline)."""

    signal: int = signal.SIGKILL
    grace: float = 0.0
    run_dir: Path | None = None


class ChildRun:
    """One child process (a run), started at once. ``stdout``/``stderr`` are subprocess's: with PIPE the
    stream is read as it comes and kept (:attr:`stdout`, :attr:`stderr`), and with ``echo`` also passed
    through to this process's own. ``session``: a session of its own, out of reach of the caller's terminal
    (then :class:`Stop`'s signals go to its whole process group)."""

    def __init__(self, argv: list[str], how: Stop, *, env: dict[str, str] | None = None, cwd: Path | None = None,
                 stdin: Any = None, stdout: Any = subprocess.PIPE, stderr: Any = subprocess.PIPE, echo: bool = False,
                 session: bool = False) -> None:
        self.how, self.session = how, session
        self.proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=stdin, stdout=stdout, stderr=stderr, text=True,
                                     encoding="utf-8", errors="replace", start_new_session=session)
        self._kept: dict[str, list[str]] = {"out": [], "err": []}
        streams = ((self.proc.stdout, sys.stdout, "out"), (self.proc.stderr, sys.stderr, "err"))
        self._tees = [threading.Thread(target=_tee, args=(stream, sink if echo else None, self._kept[key]), daemon=True)
                      for stream, sink, key in streams if stream is not None]  # fmt: skip
        for t in self._tees:
            t.start()
        with _LIVE_LOCK:
            _LIVE.add(self)

    def wait(self, timeout: float | None = None, wanted: Callable[[], bool] | None = None) -> bool:
        """Wait for the run to end; its exit code is then :attr:`returncode`. Stopped (:func:`stop`) as soon as
        ``wanted`` says it no longer is: True then. Whatever ends the wait early (an interrupt, a test's
        timeout, ``timeout`` seconds passing: subprocess.TimeoutExpired) stops the run first and goes on."""
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while True:
                try:
                    self.proc.wait(timeout=POLL)
                    break
                except subprocess.TimeoutExpired:
                    if deadline is not None and time.monotonic() >= deadline:
                        raise
                if wanted is not None and not wanted():
                    stop(self.proc, self.how, self.session)
                    return True
        except BaseException:
            stop(self.proc, self.how, self.session)
            raise
        finally:
            if self.proc.returncode is not None:
                with _LIVE_LOCK:
                    _LIVE.discard(self)
        for t in self._tees:
            t.join(timeout=5)
        return False

    def stop(self) -> None:
        """Stop the run now, as its :class:`Stop` says (:func:`stop`); its :meth:`wait` then returns."""
        stop(self.proc, self.how, self.session)

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    @property
    def stdout(self) -> str:
        return "".join(self._kept["out"])

    @property
    def stderr(self) -> str:
        return "".join(self._kept["err"])


def _tee(stream: IO[str], sink: IO[str] | None, kept: list[str]) -> None:
    for line in stream:
        kept.append(line)
        if sink is not None:
            with contextlib.suppress(Exception):  # a closed or swapped sink must not lose the rest
                sink.write(line)
                sink.flush()


def stop(proc: subprocess.Popen[Any], how: Stop, session: bool = False) -> None:
    """Stop a child run as ``how`` says (:class:`Stop`) and reap it: its process group when it has a session of
    its own (``session``), else its tree, and with ``how.run_dir`` every process of that run still alive.
    Never raises: it runs while another exception is on its way out; a second interrupt during the grace only
    cuts the grace short."""
    # A run in a session of its own is reached as its process group and by the sweep, as the API's always was:
    # that spares what left the group on purpose (a scratch janitor, takeover._internal.scratch, must outlive the run to
    # remove its folders). Any other run as its tree, taken now: a child whose parent is gone is not under it.
    tree = [] if session else _tree(proc.pid, root=False)
    if how.grace > 0:
        _signal(proc, how.signal, session)
        with contextlib.suppress(BaseException):  # the grace ran out, or a second interrupt: no more waiting
            proc.wait(timeout=how.grace)
    _signal(proc, signal.SIGKILL, session)
    with contextlib.suppress(Exception):
        proc.wait(timeout=5)  # before the tree's: reaped by psutil, its exit code would read 0
    _kill(tree)
    if how.run_dir is not None:
        _sweep(how.run_dir)


def takeover_argv(args: list[str]) -> list[str]:
    """The command line of ``takeover ARGS...`` run as a child of this process that dies with it: a caller that
    is SIGKILLed cannot stop its run, so the kernel does (``PR_SET_PDEATHSIG``, takeover._internal.lifeline), and the
    run's own workers and servers die with the run. Popen it from the thread that waits for it: the kernel
    counts the thread that started a child as its parent."""
    return [sys.executable, "-c", _TAKEOVER, str(os.getpid()), *args]


def stop_all() -> None:
    """Stop every run of this process still being waited for, each as its :class:`Stop` says: for a caller
    whose runs are waited for in other threads (the detection bench's pool), which an interrupt of the main
    thread does not reach."""
    with _LIVE_LOCK:
        runs = list(_LIVE)
    for run in runs:
        run.stop()


def _tree(pid: int, root: bool = True) -> list[psutil.Process]:
    try:
        top = psutil.Process(pid)
        return [*top.children(recursive=True), *([top] if root else [])]
    except psutil.Error:
        return []


def _signal(proc: subprocess.Popen[Any], sig: int, session: bool) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if session:
            os.killpg(proc.pid, sig)
        elif proc.poll() is None:
            proc.send_signal(sig)


def _kill(procs: list[psutil.Process], timeout: float = 10.0) -> None:
    """SIGKILL ``procs`` and wait until each is dead: gone, or a zombie. Why a zombie counts: these are the
    run's grandchildren, whose parent died first; their reaping is their new parent's (init's), which may be
    slow to do it (a container's init reaped them seconds later, and psutil.wait_procs waited for that: a
    Ctrl-C of the detection bench took 3-4 s to end)."""
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.kill()  # psutil: never a pid that was reused meanwhile
    deadline = time.monotonic() + timeout
    while (procs := [p for p in procs if _running(p)]) and time.monotonic() < deadline:
        time.sleep(0.02)


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE  # is_running: not a reused pid
    except psutil.Error:
        return False


def _sweep(run_dir: Path) -> None:
    """Every process that carries this run's folder in its environment (takeover._internal.lifeline) and is still
    alive: SIGKILLed. Children die with the run already; this is the net below that."""
    from takeover._internal.lifeline import RUN_ENV

    want = str(run_dir)
    for p in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if p.environ().get(RUN_ENV) == want:
                p.kill()


def stress_command(queue: str, seed: int, profile: str, out: Path, extra: tuple[str, ...] = ()
               ) -> tuple[int, float, Summary]:
    """One ``takeover stress`` command line for ``queue`` as a subprocess: its exit code, wall time and summary.

    The command, not the API's run: ``takeover.stress()`` hands its checked options to a child of its own
    (takeover._internal.stress_child), which returns a RunResult; the selftest and the benches want what a
    user typing the command gets, exit code and all.

    A subprocess rather than the coordinator in this process, so a planted queue that hangs or
    crashes cannot take the selftest (or the detection bench, which shares this) down with it;
    interrupted, the run and everything it started are reaped before the interrupt goes on; and should the
    caller be killed outright, the run dies with it (:func:`takeover_argv`).
    A run that wrote no summary raises UsageError with the last line it printed on stderr.
    """
    cmd = takeover_argv(["stress", "--profile", profile, "--queue", queue, "--seed", str(seed), "--out", str(out),
                         *extra])
    started = time.monotonic()
    run = ChildRun(cmd, Stop(), stdout=subprocess.DEVNULL)
    run.wait(timeout=600)
    took = time.monotonic() - started
    summary = store.read_summary(out) if run.returncode != ExitCode.USAGE else None
    if summary is None:
        line = run.stderr.strip().splitlines()[-1:] or ["no summary written"]
        raise UsageError(f"selftest: the stress run for {queue} failed (exit {run.returncode}): {line[0]}")
    return int(run.returncode or 0), took, summary
