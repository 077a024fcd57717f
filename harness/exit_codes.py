"""The exit codes every ``takeover`` command returns: one enum for the checker and the commands.

Why a module of its own: the checker decides a run's code (valid, violated, inconclusive) and the
commands add theirs (bad input, interrupted), but the checker must import nothing of the commands
(pyproject.toml, its import-linter contracts), so the codes live in a module that imports nothing at all and
both sides may lean on. An ``IntEnum``, because the numbers are the public contract: they go to the shell
as they are, ``json.dumps`` writes them as plain integers in ``summary.json`` and ``soak.json``, and a
member compares equal to its number, so a script that tests ``== 1`` keeps working.

``takeover replay RUN --queue FIXED`` exits 0 (VALID) when it says FIXED: another queue than the run's
answered every violating task's recorded calls as the spec says. On the run's own queue the same clean
replay stays INCONCLUSIVE (3): a violation that does not come back in one process there is a race or a
matter of other tasks, not a fix.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    VALID = 0  # every invariant holds (a command that checks nothing: it did what was asked; replay --queue: FIXED)
    VIOLATED = 1  # an invariant is violated, or duplicates with --fail-on-duplicates, or a target missed
    USAGE = 2  # bad input: one line on stderr, no traceback, nothing started
    INCONCLUSIVE = 3  # the run tested nothing, or the checker could not reach a verdict
    INTERRUPTED = 130  # Ctrl-C or SIGTERM (128 + SIGINT, as a shell reports it)
