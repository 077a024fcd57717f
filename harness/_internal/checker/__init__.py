"""The checker: invariants and counts over a stored run folder (history + ledger + snapshot + config).

Entry point: :func:`analyse` (see docs/design.md), which returns a :class:`CheckResult`. The run
folder is its only input: it imports neither the runner, nor the queue under test, nor the reports,
so any stored run can be re-checked with ``takeover check RUN_DIR`` wherever takeover is installed
(the import-linter contracts in pyproject.toml hold it to that).
"""

from takeover._internal.checker.check import CheckResult, analyse
from takeover._internal.checker.invariants import INVARIANTS
from takeover.summary_types import UNKNOWN, Verdict

__all__ = ["INVARIANTS", "UNKNOWN", "CheckResult", "Verdict", "analyse"]
