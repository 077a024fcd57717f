"""Combining invariant results into one verdict and one exit code (worst wins, as in Jepsen)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

import pandas as pd

from takeover._internal import answers
from takeover.exit_codes import ExitCode
from takeover.summary_types import UNKNOWN, Verdict

if TYPE_CHECKING:
    from takeover._internal.checker.invariant_result import InvariantResult
    from takeover.summary_types import Counts



# A check whose violation stands even when the adapter broke: a malformed answer is the queue's own word
# (takeover._internal.answers), not a verdict on its semantics built on a broken wire.
STANDS_ON_ITS_OWN = (answers.CHECK,)
ADAPTER_RECORD = "adapter"  # history.jsonl: {"type": "info", "f": "adapter", "value": OP, "detail": LINE}


def combine(results: Mapping[str, InvariantResult], inconclusive: str | None, adapter_broke: bool = False) -> Verdict:
    """Worst wins; but when the queue's adapter broke the protocol nothing it answered can be judged, so
    the run is inconclusive whatever the invariants say (except a check that stands on its own)."""
    values = [r.valid for r in results.values()]
    if adapter_broke:
        return False if any(results[n].valid is False for n in STANDS_ON_ITS_OWN if n in results) else UNKNOWN
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


def broken_adapter(history: pd.DataFrame) -> str | None:
    """Why the run is inconclusive when an ``exec:`` queue's adapter broke the protocol (the ``adapter``
    records its processes wrote): the first such line, which names the adapter, the request and what it
    did, and how many more there were. None when no adapter broke."""
    if not len(history):
        return None
    lines = history.loc[(history["f"] == ADAPTER_RECORD).to_numpy(dtype=bool), "detail"]
    if not len(lines):
        return None
    more = f" (and {len(lines) - 1} more: the history's '{ADAPTER_RECORD}' records)" if len(lines) > 1 else ""
    return f"the queue's adapter broke the protocol, so the run says nothing about the queue: {lines.iloc[0]}{more}"


def damaged_reason(history_lines: int, marks: Collection[str]) -> str | None:
    """A history that cannot be judged at all, said in one line: empty, or cut short. A run's coordinator
    writes ``run start`` when the faulted phase begins and ``run drain_end`` (or ``run interrupted``) when
    it ends; a history with the first and neither of the others ends before its run did (cut in half, a
    disk that filled, a copy made mid-run), and every rule judged on it would blame the queue for what is
    missing. (A history written by hand, as the checker's own tests do, has no run records: judged.)"""
    if history_lines == 0:
        return "the history is empty: nothing was recorded, so nothing can be judged (a damaged run folder?)"
    if "start" in marks and not {"drain_end", "interrupted"} & set(marks):
        return ("the history ends before its run did (a 'run start' record and no 'run drain_end'): it is cut "
                "short or damaged, so nothing is judged")
    return None


def exit_code(valid: Verdict, duplicates_fail: bool) -> ExitCode:
    if valid is False:
        return ExitCode.VIOLATED
    if valid == UNKNOWN:
        return ExitCode.INCONCLUSIVE
    return ExitCode.VIOLATED if duplicates_fail else ExitCode.VALID
