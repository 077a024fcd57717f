"""Combining invariant results into one verdict and one exit code (worst wins, as in Jepsen)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from takeover.exit_codes import ExitCode
from takeover.summary_types import UNKNOWN, Verdict

if TYPE_CHECKING:
    from takeover.checker.invariant_result import InvariantResult
    from takeover.summary_types import Counts



def combine(results: Mapping[str, InvariantResult], inconclusive: str | None) -> Verdict:
    values = [r.valid for r in results.values()]
    if any(v is False for v in values):
        return False
    if inconclusive or any(v == UNKNOWN for v in values):
        return UNKNOWN
    return True


def inconclusive_reason(counts: Counts, history_lines: int) -> str | None:
    """A run that tested nothing must not pass: say why it proves nothing."""
    if history_lines == 0:
        return "the history is empty"
    claims = counts["claims"]
    completed = claims["ok"] + claims["empty"] + counts["finishes"]["accepted"] + counts["finishes"]["rejected"]
    if completed == 0:
        return "no queue operation completed"
    if claims["ok"] == 0:
        return "no task was ever claimed"
    return None


def exit_code(valid: Verdict, duplicates_fail: bool) -> ExitCode:
    if valid is False:
        return ExitCode.VIOLATED
    if valid == UNKNOWN:
        return ExitCode.INCONCLUSIVE
    return ExitCode.VIOLATED if duplicates_fail else ExitCode.VALID
