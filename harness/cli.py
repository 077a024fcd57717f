"""The ``takeover`` command line: one subcommand per module in ``takeover._internal.commands``.

Each subcommand module exposes ``HELP`` (one line), ``configure(parser)`` and ``run(args) -> ExitCode``.
The CLI keeps the error contract (:func:`takeover.errors.under_error_contract`): bad input is one line
on stderr and exit code 2, never a traceback, and Ctrl-C is exit 130 after the command has cleaned up
after itself.
"""

from __future__ import annotations

import _thread
import argparse
import contextlib
import importlib
import importlib.util
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from takeover.errors import UsageError, under_error_contract
from takeover.exit_codes import ExitCode

# Order is the order shown in --help. A module that does not exist yet is simply not offered.
COMMANDS = ("scenarios", "stress", "check", "replay", "explore", "selftest", "hunt", "reconcile", "sweep", "tune",
            "soak", "merge", "bench", "init-ci", "mutate")


DESCRIPTION = (
    "Stress a lease-based task queue with real processes and real faults, and check every promise of its "
    "spec. The queue keeps its tasks in a database (SQLite, PostgreSQL, Redis), or is any queue behind "
    "exec:COMMAND: a queue in any language, spoken to over JSON lines."
)


class OneLineParser(argparse.ArgumentParser):
    """argparse prints a usage block before its error; the error contract wants one line."""

    def error(self, message: str) -> None:  # type: ignore[override]
        # "takeover: error: " is printed by main(); name the subcommand only when there is one.
        sub = self.prog.partition(" ")[2]
        raise UsageError(f"{sub}: {message}" if sub else message)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with ``only`` (a command's name), the parser of that one command alone, which is
    all ``takeover only ...`` parses: the other commands' modules are not imported (explore's Hypothesis and
    replay's pandas cost every other command about 0.4 s of CPU to start)."""
    parser = OneLineParser(
        prog="takeover",
        description=DESCRIPTION,
    )
    from takeover.version import __version__

    parser.add_argument("--version", action="version", version=f"takeover {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    for name in COMMANDS if only is None else (only,):
        module_name = f"takeover._internal.commands.{name.replace('-', '_')}"  # init-ci lives in init_ci.py
        if importlib.util.find_spec(module_name) is None:
            continue
        module = importlib.import_module(module_name)
        cmd = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.configure(cmd)
        name_defaults(cmd)
        cmd.set_defaults(_run=module.run)
    return parser


def name_defaults(parser: argparse.ArgumentParser) -> None:
    """Every option that takes a value says its default in ``--help``: those whose help does not say it yet
    get argparse's default (``none``: not given, the option does nothing). A flag is off unless given."""
    for action in parser._actions:
        if not action.option_strings or action.nargs == 0 or not action.help or action.help == argparse.SUPPRESS:
            continue
        if "default" in action.help:
            continue
        default = action.default
        shown = "none" if default is None or default == [] else default
        action.help += f" (default: {shown})".replace("%", "%%")


def main(argv: Sequence[str] | None = None) -> int:
    with _stop_signals_as_ctrl_c():
        try:
            return under_error_contract(lambda: _main(argv))
        except BrokenPipeError:  # the reader went away (``| head``): nothing is wrong with the run
            return ExitCode.VALID


STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def _stop_signals_as_ctrl_c() -> Iterator[None]:
    """SIGTERM and SIGHUP end every command as Ctrl-C does: a KeyboardInterrupt, so each command's cleanup
    runs (its temporary folders, its servers, its processes), it says ``interrupted`` and exits 130. Left at
    their default they killed a command on the spot (``explore`` exited 143 in silence and left its
    ``takeover-explore-*`` folders). A command that takes them itself while it runs (a stress run's
    supervisor, the hunt, the soak) does so on top of this; a signal that is ignored (``nohup``) stays so."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    for sig, handler in old.items():
        if handler is signal.SIG_DFL:
            signal.signal(sig, _interrupt)
    global _hook
    hook = _hook = sys.unraisablehook
    sys.unraisablehook = _unraisable
    try:
        yield
    finally:
        sys.unraisablehook = hook
        for sig, handler in old.items():
            if handler is signal.SIG_DFL:
                signal.signal(sig, handler)
        _stopping.clear()
        _redeliver.clear()


STOP_GRACE = 30.0  # seconds a command gets to clean up after SIGTERM/SIGHUP before it leaves regardless
_stopping = threading.Event()
_redeliver = threading.Event()


def _unraisable(args: Any) -> None:
    """A Ctrl-C (or a SIGTERM made one) that lands while a garbage-collector callback or a ``__del__`` runs
    cannot propagate: Python prints it as "Exception ignored in ..." with a traceback, and the command goes
    on as if never interrupted (Hypothesis's gc callback, under explore, met it). Delivered again instead, in
    silence, at the main thread's next chance."""
    if args.exc_type is KeyboardInterrupt:
        again = signal.SIGINT
        if _stopping.is_set():  # it came from SIGTERM/SIGHUP: _interrupt must not take it for a second one
            _redeliver.set()
            again = signal.SIGTERM
        # From another thread: raised here, inside the hook, it would be lost once more.
        threading.Timer(0.01, _thread.interrupt_main, args=(again,)).start()
        return
    _hook(args)


_hook = sys.unraisablehook


def _interrupt(signum: int, _frame: object) -> None:
    """The first SIGTERM or SIGHUP is a Ctrl-C (KeyboardInterrupt); should the command not have ended
    STOP_GRACE seconds later (the interrupt landed where a library swallowed it, or cleanup hangs), or a
    second one come, it leaves at once with 130: its scratch folders go with the janitor
    (takeover._internal.scratch), its children with the kernel's death signal, its servers with their watchdogs."""
    if _redeliver.is_set():  # the first one's KeyboardInterrupt was lost (_unraisable): this is it again
        _redeliver.clear()
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")
    if _stopping.is_set():
        _leave(f"a second {signal.Signals(signum).name}")
    _stopping.set()
    threading.Thread(target=_leave_later, name="takeover-stop-grace", daemon=True).start()
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def _leave_later() -> None:
    """Leaves unless the command ended meanwhile (main() returned: the event is cleared; in a process that
    calls main() again, such as a test's, nothing happens to it)."""
    time.sleep(STOP_GRACE)
    if _stopping.is_set():
        _leave(f"still running {STOP_GRACE:g} s after the signal")


def _leave(why: str) -> None:
    with contextlib.suppress(Exception):
        print(f"takeover: interrupted ({why}): leaving now", file=sys.stderr, flush=True)
    os._exit(ExitCode.INTERRUPTED)


def _main(argv: Sequence[str] | None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(words[0] if words and words[0] in COMMANDS else None)
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return ExitCode.USAGE
    return int(args._run(args))


if __name__ == "__main__":
    sys.exit(main())
