"""The checker: invariants and counts over a stored run folder (history + ledger + snapshot).

Entry point: :func:`check_run_dir` (see docs/design.md). It never imports the runner, so any stored
run can be re-checked with ``takeover check RUN_DIR``.
"""

from takeover.checker.check import analyse, check_run_dir
from takeover.checker.invariants import INVARIANTS

__all__ = ["INVARIANTS", "analyse", "check_run_dir"]
