"""Errors that reach the user as one line and exit code 2, never as a traceback."""


class UsageError(Exception):
    """Bad input from the user: an option, a path, a queue name, a stored run.

    The CLI prints ``takeover: error: <message>`` and exits 2. Raise it before anything is
    started or written, so that bad input never costs a partial run.
    """


class ContractError(UsageError):
    """A queue that does not implement the queue contract (takeover.contract)."""
