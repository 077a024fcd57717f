"""Combining invariant results into one verdict and one exit code (worst wins, as in Jepsen)."""

from __future__ import annotations

from typing import Any

from takeover.checker.invariants import InvariantResult

EXIT_VALID, EXIT_VIOLATED, EXIT_INCONCLUSIVE = 0, 1, 3


def combine(results: dict[str, InvariantResult], inconclusive: str | None) -> bool | str:
    values = [r.valid for r in results.values()]
    if any(v is False for v in values):
        return False
    if inconclusive or any(v == "unknown" for v in values):
        return "unknown"
    return True


def inconclusive_reason(counts: dict[str, Any], history_lines: int) -> str | None:
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


def exit_code(valid: bool | str, duplicates_fail: bool) -> int:
    if valid is False:
        return EXIT_VIOLATED
    if valid == "unknown":
        return EXIT_INCONCLUSIVE
    return EXIT_VIOLATED if duplicates_fail else EXIT_VALID
