"""Queues in any language: ``--queue exec:COMMAND`` speaks the queue contract with a process over JSON lines.

Why a process and not a Python class: most teams that run background jobs off a database do it from
Node, Go, Ruby or Elixir, and their libraries have the same holes takeover finds in Python ones. A
small adapter in the library's own language translates each contract call into the library's API;
takeover starts it and talks to it on its stdin and stdout, one JSON object a line (the protocol,
public and versioned: docs/reference/protocol.md). Everything else is unchanged: every process that uses the
queue (each worker incarnation, the coordinator, the probe process, each scenario and explore
example) opens it through :func:`takeover.contract.open_queue`, which here starts one adapter
process for that process and hands back an :class:`ExecQueue` with the contract's methods.

What the adapter must never outlive or outrun:

- its owner's death: the kernel SIGKILLs it when the process that started it dies
  (``PR_SET_PDEATHSIG``; the adapter is started from a thread that lives as long as the process,
  because the kernel keys that signal on the starting *thread*), and takeover closes its stdin and
  reaps it on ``close()``;
- a frozen worker: a worker puts itself at the head of a process group of its own
  (:func:`share_group`) and its adapter joins that group, so the SIGSTOP, SIGCONT and SIGKILL that the
  supervisor sends to the group (:func:`takeover._internal.run.supervision.send`) reach both at once. Adapters of
  the other processes get a group of their own, out of reach of a terminal's Ctrl-C, which is the
  coordinator's to handle.

- its own children: when takeover is done with an adapter (``close()``, or a broken one) it SIGKILLs the
  adapter's process group and every descendant it had, so a ``sleep 3000`` an adapter forked does not
  outlive the run. (A SIGKILL of takeover itself leaves the kernel's death signal to kill the adapter;
  children the adapter forked and left running are then its own to end: nothing of takeover is alive to
  do it.)

What can go wrong on the wire is one line naming the adapter, the request and what it did instead: a
first line that is not the hello, a line that is not JSON or longer than :data:`MAX_LINE`, an answer to
another request (one never sent, or one answered already), an adapter that exits (its child holding its
stdout open or not) or does not answer within :data:`CALL_TIMEOUT` seconds (of this process's own
waking time: a worker frozen with its adapter does not count the freeze). Every read has that deadline,
``close`` and the hello included. Before the run (the contract check opens the queue once) that is a
:class:`ContractError`, exit 2; during it, the call that met it raises :class:`AdapterBroken`, which the
run records as the adapter's failure (the run is then INCONCLUSIVE, never a verdict on the queue's
semantics), and every later call on that adapter raises the same line. An ``{"error": ...}`` answer is
an ordinary exception.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import json
import os
import queue as _queue
import select
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any

from takeover._internal.queue_types import Claim, SnapshotRow
from takeover._internal.store import ADAPTER_LOG
from takeover.errors import ContractError

PREFIX = "exec:"
VERSION = 1  # the protocol's version: the adapter's first line says {"takeover": 1, ...}
DB_ENV = "TAKEOVER_DB"  # the run's database, as every Python queue's constructor is given it
LOG_ENV = "TAKEOVER_RUN_DIR"  # set by the supervisor in every process of a run (takeover._internal.run.lifeline)
LOG_FILE = ADAPTER_LOG  # in the run folder: everything the run's adapters printed on stderr
HELLO_TIMEOUT = 60.0  # seconds an adapter may take to start (a library that migrates its schema first)
CLOSE_WAIT = 5.0  # seconds an adapter gets to answer close, and to exit after its stdin closed, before SIGKILL
# Seconds an adapter may take over one answer before it is called hung; a run sets its own (its drain
# timeout, the time after which the coordinator calls one of its own queue calls stuck: set_call_timeout).
CALL_TIMEOUT = 60.0
MAX_LINE = 1 << 20  # bytes of one line on the adapter's stdout (docs/reference/protocol.md): 1 MiB
_READ = 1 << 16
_SLICE = 0.25  # seconds of one wait for the adapter's stdout: then whether it still lives is looked at
_LOG_LINES = 3  # lines of adapter.log quoted when an adapter breaks
OPTIONAL = ("extend", "register_many")  # the hello's flags for the optional methods
_PR_SET_PDEATHSIG = 1
_SHOWN = 120  # characters of a bad line shown in an error
_ERROR_SHOWN = 300  # characters of an {"error": TEXT} answer kept: the text goes into every record of the call
# Made once: json.dumps with any option builds a new encoder on every call, and json.loads of bytes first
# guesses their encoding; a call through the bridge pays both twice per claim+finish (bench bridge_vs_native).
_ENCODE = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode
_DECODE = json.JSONDecoder().decode


def is_exec(spec: object) -> bool:
    return isinstance(spec, str) and spec.startswith(PREFIX)


class AdapterError(Exception):
    """The adapter answered ``{"error": TEXT}``: the call failed as a Python queue's call raises."""


class AdapterBroken(ContractError):
    """The adapter broke the protocol or exited: this call and every later one on it fail with this line."""


# Told once per broken adapter, with the request's op (``hello`` for the first line) and the line naming it:
# a run's processes record it in the history (an ``adapter`` record), which makes the run INCONCLUSIVE.
on_broken: Callable[[str, str], None] | None = None


def set_call_timeout(seconds: float) -> None:
    """How long every adapter this process starts from now on may take over one answer (a run's workers
    set their run's drain timeout: the coordinator gives up its own calls after that long too)."""
    global CALL_TIMEOUT
    CALL_TIMEOUT = float(seconds)


# What each adapter said of its library in its hello (``"library"``: docs/reference/protocol.md), by queue spec:
# a bug report (takeover._internal.replay.issue) names the library and its version from it, as it reads a Python
# adapter's class attributes. Filled by the hello, so only once an adapter of that spec has been started here.
LIBRARY_KEYS = {"name": str, "version": str, "home": str, "calls": dict, "states": dict}
_libraries: dict[str, dict[str, Any]] = {}


def _library(hello: dict[str, Any]) -> dict[str, Any] | str | None:
    """The hello's ``library`` object, checked; a string naming what is wrong with it; None without one."""
    lib = hello.get("library")
    if lib is None:
        return None
    if not isinstance(lib, dict) or not isinstance(lib.get("name"), str) or not isinstance(lib.get("version"), str):
        return 'its first line\'s "library" must be an object with "name" and "version" strings'
    for key, value in lib.items():
        kind = LIBRARY_KEYS.get(key)
        if kind is None:
            return f'its first line\'s "library" has an unknown key {key!r} (known: {", ".join(LIBRARY_KEYS)})'
        if not isinstance(value, kind) or (kind is dict and not all(
                isinstance(k, str) and isinstance(v, str) for k, v in value.items())):
            return f'its first line\'s "library" {key!r} must be {"a string" if kind is str else "strings by name"}'
    return lib


# -- which process group an adapter joins ----------------------------------------------------------------------
_join_group = False


def share_group() -> None:
    """Called by a worker before it opens the queue: it leads a process group of its own from now on, and
    the adapters it starts join that group, so a signal sent to the group freezes or kills both."""
    global _join_group
    if os.getpgrp() != os.getpid():
        os.setpgid(0, 0)
    _join_group = True


# -- starting the adapter -------------------------------------------------------------------------------------
def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).prctl
    except OSError:
        return None


_PRCTL = _prctl()  # looked up here: a forked child must not load a library (another thread may hold its lock)


def _die_with(owner: int) -> Callable[[], None]:
    def setup() -> None:  # in the child, between fork and exec
        if _PRCTL is not None:
            _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != owner:  # the owner died before the call above
            os._exit(70)

    return setup


class _Starter:
    """One thread per process that starts every adapter: it lives as long as the process, so the
    kernel's death signal (keyed on the thread that forked) fires when the process dies, not when the
    thread that opened the queue ends (a scenario's or the coordinator's call thread)."""

    def __init__(self) -> None:
        self.jobs: _queue.SimpleQueue[tuple[Callable[[], Any], list[Any], threading.Event]] = _queue.SimpleQueue()
        self.pid = os.getpid()
        threading.Thread(target=self._serve, name="takeover-adapter-starter", daemon=True).start()

    def _serve(self) -> None:
        while True:
            fn, box, done = self.jobs.get()
            try:
                box.append((True, fn()))
            except BaseException as exc:  # noqa: BLE001 - handed back to the caller
                box.append((False, exc))
            done.set()

    def run(self, fn: Callable[[], Any]) -> Any:
        box: list[Any] = []
        done = threading.Event()
        self.jobs.put((fn, box, done))
        done.wait()
        ok, value = box[0]
        if not ok:
            raise value
        return value


_starter: _Starter | None = None
_starter_lock = threading.Lock()


def _start(fn: Callable[[], Any]) -> Any:
    global _starter
    with _starter_lock:
        if _starter is None or _starter.pid != os.getpid():
            _starter = _Starter()
        starter = _starter
    return starter.run(fn)


def _log_target() -> tuple[IO[bytes] | None, bool]:
    """Where the adapter's stderr goes: the run folder's adapter.log inside a run, else this process's."""
    run_dir = os.environ.get(LOG_ENV)
    if run_dir and os.path.isdir(run_dir):
        return open(os.path.join(run_dir, LOG_FILE), "ab"), True  # noqa: SIM115 - closed once handed over
    return None, False


# -- the queue --------------------------------------------------------------------------------------------------
class ExecFactory:
    """What ``load_queue_factory("exec:COMMAND")`` returns: ``factory(database)`` starts the adapter."""

    # The kinds of database are the adapter's to say, in its hello; the check is made there (ExecQueue).
    databases = ("sqlite", "postgres", "redis")

    def __init__(self, spec: str) -> None:
        command = spec[len(PREFIX):].strip()
        if not command:
            raise ContractError(f"--queue exec:COMMAND needs a command, got {spec!r}")
        try:
            self.argv = shlex.split(command)
        except ValueError as exc:
            raise ContractError(f"--queue {spec!r}: the command cannot be split into words: {exc}") from None
        self.spec = spec
        self.cwd = os.getcwd()  # the folder the command was given from (workers inherit it)

    def __call__(self, database: str) -> ExecQueue:
        return ExecQueue(self.spec, self.argv, self.cwd, database)

    # The report's vocabulary (takeover._internal.replay.issue), from the hello of an adapter of this spec started here.
    def _said(self, key: str) -> Any:
        return _libraries.get(self.spec, {}).get(key)

    library = property(lambda self: self._said("name"))
    library_version = property(lambda self: self._said("version"))
    library_home = property(lambda self: self._said("home"))
    library_calls = property(lambda self: self._said("calls"))
    library_states = property(lambda self: self._said("states"))


class ExecQueue:
    """The contract's methods, each one request and one answer on the adapter's pipes."""

    def __init__(self, spec: str, argv: list[str], cwd: str, database: str) -> None:
        self.spec = spec
        self.broken: str | None = None
        self.next_id = 0
        self.op = "hello"  # the request under way, for on_broken
        self.timeout = CALL_TIMEOUT
        self._buffer = bytearray()
        self._scanned = 0  # bytes of the buffer already searched for a newline
        env = {**os.environ, DB_ENV: database}
        log, close_log = _log_target()
        self._log = log.name if close_log and log is not None else None
        owner = os.getpid()

        def popen() -> subprocess.Popen[bytes]:
            return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, cwd=cwd,
                                    env=env, close_fds=True, preexec_fn=_die_with(owner),
                                    process_group=None if _join_group else 0)  # fmt: skip

        try:
            self.proc: subprocess.Popen[bytes] = _start(popen)
        except OSError as exc:
            raise ContractError(f"adapter {self.name} cannot be started: {exc.strerror or exc}") from None
        finally:
            if close_log and log is not None:
                log.close()
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._in: IO[bytes] = self.proc.stdin
        self._in_fd = self._in.fileno()  # written with os.write: one write(2) a request, no buffer to flush
        self._out = self.proc.stdout.fileno()
        self._poll = select.poll()
        self._poll.register(self._out, select.POLLIN | select.POLLHUP | select.POLLERR)
        try:
            self._hello(database)
        except BaseException:
            self._stop()
            raise

    @property
    def name(self) -> str:
        return repr(self.spec[len(PREFIX):].strip())

    def _fail(self, what: str) -> AdapterBroken:
        pid = getattr(getattr(self, "proc", None), "pid", None)
        self.broken = f"adapter {self.name} (pid {pid}): {what}{_log_tail(self._log)}"
        if on_broken is not None:
            with contextlib.suppress(Exception):  # telling it must never hide the line itself
                on_broken(self.op, self.broken)
        return AdapterBroken(self.broken)

    def _hello(self, database: str) -> None:
        from takeover._internal.db import db_option_for, kind

        line = self._line(HELLO_TIMEOUT, "its first line (the hello)")
        try:
            hello = json.loads(line)
        except (ValueError, RecursionError):
            hello = None
        want = f'{{"takeover": {VERSION}, "databases": [...]}}'
        if not isinstance(hello, dict) or "takeover" not in hello:
            raise self._fail(f"its first line must be {want}, got {_shown(line)}")
        if hello["takeover"] != VERSION or isinstance(hello["takeover"], bool):
            raise self._fail(f"it speaks version {hello['takeover']!r} of the protocol; this takeover speaks {VERSION}")
        databases = hello.get("databases")
        if not isinstance(databases, list) or not all(isinstance(d, str) for d in databases):
            raise self._fail(f"its first line's \"databases\" must be a list of names, got {_shown(line)}")
        wanted = kind(database)
        if wanted not in databases:
            option = db_option_for(databases)
            raise ContractError(f"queue {self.spec!r} takes only {' or '.join(databases) or 'no known'} databases "
                                f"(its hello's \"databases\"), not {wanted}: run it with {option}")
        for flag in OPTIONAL:
            if hello.get(flag) is True:
                setattr(self, flag, getattr(self, f"_{flag}"))
        lib = _library(hello)
        if isinstance(lib, str):
            raise self._fail(lib)
        if lib is not None:
            _libraries[self.spec] = lib

    # -- the wire ------------------------------------------------------------------------------------------------
    def _line(self, timeout: float, waiting_for: str) -> bytes:
        """The adapter's next line on stdout. An adapter that exits (even while a child of its holds its stdout
        open), prints more than :data:`MAX_LINE` bytes without a newline, or says nothing for ``timeout``
        seconds of this process's waking time breaks it. The buffer grows by appending and is searched from
        where the last search stopped: a long line costs its length once, not once per read."""
        waited = 0.0
        while True:
            end = self._buffer.find(b"\n", self._scanned)
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                self._scanned = 0
                return line
            self._scanned = len(self._buffer)
            if len(self._buffer) > MAX_LINE:
                raise self._fail(f"{waiting_for}: printed a line longer than {MAX_LINE} bytes without its end, the "
                                 f"protocol's limit: {_shown(bytes(self._buffer[:_SHOWN]))}")  # fmt: skip
            left = timeout - waited
            if left <= 0:
                raise self._fail(f"{waiting_for}: no answer within {timeout:g}s")
            step = min(left, _SLICE)
            started = time.monotonic()
            ready = self._poll.poll(step * 1000)
            # Only up to the step counts: a process frozen with its adapter (SIGSTOP) wakes late, and that
            # freeze is not the adapter's delay.
            waited += min(time.monotonic() - started, step)
            if not ready:
                if self._exited() is not None:  # gone, and a child of its keeps its stdout open
                    raise self._fail(f"{waiting_for}: {self._exit_text()}")
                continue
            chunk = os.read(self._out, _READ)
            if not chunk:
                raise self._fail(f"{waiting_for}: {self._exit_text()}")
            self._buffer += chunk

    def _exited(self) -> int | None:
        """The adapter's wait status code as Popen gives it (signal: negative) once it has exited, else None;
        it is not reaped (WNOWAIT), so its pid, and its process group's id, stay its own until :meth:`_stop`."""
        if self.proc.returncode is not None:
            return self.proc.returncode
        try:
            info = os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return self.proc.poll()
        if info is None or info.si_pid == 0:
            return None
        return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status

    def _exit_text(self) -> str:
        deadline = time.monotonic() + 1.0
        while (code := self._exited()) is None and time.monotonic() < deadline:
            time.sleep(0.01)
        if code is None:
            return "closed its stdout"
        how = f"signal {_signal_name(-code)}" if code < 0 else f"code {code}"
        partial = f" after printing {_shown(bytes(self._buffer))}" if self._buffer else ""
        return f"exited with {how}{partial} (its stderr is in the run folder's {LOG_FILE}, or on this terminal)"

    def _call(self, request: dict[str, Any], timeout: float | None = None) -> Any:
        if self.broken is not None:
            raise AdapterBroken(self.broken)
        self.next_id += 1
        rid = self.next_id
        self.op = request["op"]
        data = _ENCODE({"id": rid, **request}).encode() + b"\n"
        try:
            while data:
                data = data[os.write(self._in_fd, data):]
        except OSError:
            raise self._fail(f"request {rid} ({request['op']}): {self._exit_text()}") from None
        line = self._line(self.timeout if timeout is None else timeout, f"request {rid} ({request['op']})")
        try:
            answer = _DECODE(line.decode())
        except (ValueError, RecursionError):  # UnicodeDecodeError included
            answer = None
        if not isinstance(answer, dict) or "id" not in answer or ("result" not in answer and "error" not in answer):
            raise self._fail(f"answered request {rid} ({request['op']}) with a line that is not "
                             f'{{"id": {rid}, "result": ...}}: {_shown(line)}')  # fmt: skip
        if answer["id"] != rid:
            other = answer["id"]
            known = isinstance(other, int) and not isinstance(other, bool)
            which = (f"an answer to request {other}, answered already" if known and 0 < other < rid else
                     f"an answer to request {other}, never sent" if known and other > rid else f"id {_quoted(other)}")
            raise self._fail(f"answered request {rid} ({request['op']}) with {which}: {_shown(line)}")
        if "error" in answer:
            text = str(answer["error"])
            if len(text) > _ERROR_SHOWN:
                text = f"{text[:_ERROR_SHOWN]}... ({len(text)} characters)"
            raise AdapterError(text)
        return answer["result"]

    def _stop(self) -> None:
        """Close its stdin, give it a moment to leave (none when it broke), then SIGKILL what is left of it:
        itself, its process group when it has one of its own, and every descendant it had; reaped either way.
        The group is killed before the adapter is reaped, so its id cannot belong to anyone else yet."""
        kids = _descendants(self.proc.pid)
        with contextlib.suppress(OSError):
            self._in.close()
        deadline = time.monotonic() + (0.0 if self.broken is not None else CLOSE_WAIT)
        while self._exited() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        if not _join_group:  # its own group (a worker's adapter is in the worker's group, killed with it)
            with contextlib.suppress(OSError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            self.proc.kill()
        self.proc.wait()
        for kid in kids:
            with contextlib.suppress(Exception):
                kid.kill()  # psutil: never a pid that was reused meanwhile
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    # -- the contract ----------------------------------------------------------------------------------------------
    def register(self, task_id: str, now: float) -> None:
        self._call({"op": "register", "task_id": task_id, "now": now})

    def _register_many(self, task_ids: list[str], now: float) -> None:
        self._call({"op": "register_many", "task_ids": list(task_ids), "now": now})

    def claim(self, worker: str, now: float, lease: float) -> Claim | None:
        result = self._call({"op": "claim", "worker": worker, "now": now, "lease": lease})
        if isinstance(result, list) and len(result) == 3:
            return result[0], result[1], result[2]
        return result  # shape checked by the caller (contract.validate_claim_result)

    def finish(self, task_id: str, generation: int, outcome: str, now: float) -> bool:
        return self._call({"op": "finish", "task_id": task_id, "generation": generation, "outcome": outcome,
                           "now": now})  # fmt: skip

    def _extend(self, task_id: str, generation: int, now: float, lease: float) -> Any:
        """``true`` is the lease until ``now + lease`` (the protocol's short answer), ``false`` or ``null`` a lost
        lease; anything else is handed on as decoded, for the caller's check of every answer
        (takeover._internal.answers: a number must be finite; text, a list, ... is a malformed answer, named as
        such)."""
        result = self._call({"op": "extend", "task_id": task_id, "generation": generation, "now": now,
                             "lease": lease})  # fmt: skip
        if result is True:
            return now + lease
        if result is False or result is None:
            return None
        return result

    def snapshot(self) -> list[SnapshotRow]:
        rows = self._call({"op": "snapshot"})
        if isinstance(rows, list):
            return [tuple(r) if isinstance(r, list) else r for r in rows]
        return rows  # shape checked by the caller (contract.validate_snapshot)

    def close(self) -> None:
        try:
            if self.broken is None and self._exited() is None:
                self._call({"op": "close"}, CLOSE_WAIT)
        finally:
            self._stop()


def _shown(line: bytes) -> str:
    text = line[: _SHOWN * 4].decode("utf-8", "replace")
    return repr(text if len(text) <= _SHOWN and len(line) <= _SHOWN * 4 else text[:_SHOWN] + "...")


def _quoted(value: object) -> str:
    text = json.dumps(value)
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."


def _signal_name(number: int) -> str:
    """``SIGKILL``, or ``SIGRTMIN+2`` for a real-time signal (which has no name in :class:`signal.Signals`)."""
    try:
        return signal.Signals(number).name
    except ValueError:
        rtmin = getattr(signal, "SIGRTMIN", 0)
        return f"SIGRTMIN+{number - rtmin}" if rtmin and number >= rtmin else f"number {number}"


def _descendants(pid: int) -> list[Any]:
    """The adapter's children, theirs, ...: taken while it lives, killed once it is gone (psutil knows them
    by pid and start time, so a pid reused meanwhile is never signalled)."""
    try:
        import psutil

        return list(psutil.Process(pid).children(recursive=True))
    except Exception:  # noqa: BLE001 - gone already, or no /proc: nothing to collect
        return []


def _log_tail(path: str | None) -> str:
    """``; adapter.log ends: "..." | "..."``: the last lines the run's adapters printed on stderr, cut short,
    so the one line that names a broken adapter says what it said last (empty outside a run)."""
    if path is None:
        return ""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 4096))
            tail = fh.read().decode("utf-8", "replace").splitlines()[-_LOG_LINES:]
    except OSError:
        return ""
    lines = [line.strip()[:_SHOWN] for line in tail if line.strip()]
    return f"; {LOG_FILE} ends: " + " | ".join(lines) if lines else f"; {LOG_FILE} is empty"
