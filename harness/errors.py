"""Errors that reach the user as one line and exit code 2, never as a traceback; and the one place
that turns them (and a Ctrl-C) into that line and that exit code.

Why one place: every entry point that ends in an exit code (the ``takeover`` command line, the run
process the Python API starts, ``python -m takeover.benchmarks.detection``) owes the same contract:
bad input is ``PROG: error: MESSAGE`` on stderr and exit 2, a Ctrl-C is one line and exit 130, once
the command has cleaned up after itself. Written out in each, the three copies drifted (one said
``PROG: MESSAGE``); :func:`under_error_contract` is that contract, once.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from takeover.exit_codes import ExitCode


class UsageError(Exception):
    """Bad input from the user: an option, a path, a queue name, a stored run.

    The CLI prints ``takeover: error: <message>`` and exits 2. Raise it before anything is
    started or written, so that bad input never costs a partial run.
    """


class ContractError(UsageError):
    """A queue that does not implement the queue contract (takeover.contract)."""


def under_error_contract(body: Callable[[], int], prog: str = "takeover", *, interrupted: str = "interrupted") -> int:
    """``body()``'s exit code; a :class:`UsageError` becomes ``PROG: error: MESSAGE`` on stderr and exit 2,
    a Ctrl-C (KeyboardInterrupt) ``PROG: INTERRUPTED`` and exit 130. Any other exception goes on its way:
    it is a bug, and its traceback is what a maintainer needs."""
    try:
        return int(body())
    except UsageError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    except KeyboardInterrupt:
        print(f"{prog}: {interrupted}", file=sys.stderr)
        return ExitCode.INTERRUPTED
