"""The checker: invariants and counts over a stored run folder (history + ledger + snapshot + config).

Entry point: :func:`analyse` (see docs/design.md), which returns a :class:`CheckResult`. The run
folder is its only input: it imports neither the runner, nor the queue under test, nor the reports,
so any stored run can be re-checked with ``takeover check RUN_DIR`` wherever takeover is installed
(tests/unit/test_import_graph.py holds it to that).
"""

from takeover.checker.check import CheckResult, analyse
from takeover.checker.invariants import INVARIANTS
from takeover.checker.verdict import UNKNOWN, Verdict

__all__ = ["INVARIANTS", "UNKNOWN", "CheckResult", "Verdict", "analyse"]
