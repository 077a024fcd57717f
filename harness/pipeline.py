"""From a run folder to a verdict on the terminal: check -> summary.json -> reports -> console.

Why one function: ``takeover stress``, ``check``, ``reconcile`` and ``soak`` (and each sweep cell)
all end a run the same way, and the order matters. ``summary.json`` is written first, so a report
that fails to draw still leaves the verdict in the folder; the console line comes last and names
every file that was written. The data only flows one way here: the checker reads the folder and
returns a :class:`~takeover.checker.CheckResult`, the reports render that result, and nothing
downstream reaches back into the checker.
"""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from takeover import store
from takeover.checker import CheckResult, analyse
from takeover.reports import write_reports
from takeover.reports.console import short_summary


def check_and_report(run_dir: str | Path, *, fail_on_duplicates: bool = False,
                     max_duplicates_per_1000: float | None = None, reports: bool = True,
                     as_json: bool = False, out: TextIO | None = None) -> CheckResult:
    """Check a stored run, write ``summary.json`` and ``violations.csv`` (and, with ``reports``,
    report.md, report.html and junit.xml) into it, print the short summary (or, with ``as_json``,
    summary.json) on ``out`` when one is given, and return the result; its ``exit_code`` is the
    command's. The duplicate options are the gate of :mod:`takeover.checker.gate`."""
    result = analyse(run_dir, fail_on_duplicates=fail_on_duplicates, max_duplicates_per_1000=max_duplicates_per_1000)
    folder = Path(run_dir)
    written = [store.write_summary(folder, result.summary), store.write_violations(folder, result.violations)]
    if reports:
        written += write_reports(folder, result)
    if out is not None:
        out.write(store.dump_summary(result.summary) if as_json else short_summary(result.summary, written))
        out.flush()
    return result
