"""Reports written next to summary.json: report.md, report.html (self-contained), junit.xml.

They render what the checker concluded (a :class:`takeover._internal.checker.CheckResult`) and never run
any part of the check themselves."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from takeover._internal.store import JUNIT_XML, REPORT_FILES, REPORT_HTML, REPORT_MD

if TYPE_CHECKING:  # importing the package must stay cheap: the soak and sweep reports need no checker
    from takeover._internal.checker import CheckResult


def write_reports(folder: Path, result: CheckResult) -> list[str]:
    """Render every report into ``folder``; returns the file names written."""
    from takeover.reports import coverage, figures, html, junit, markdown, tasks, throughput

    summary, fx = result.summary, result.facts
    (folder / REPORT_MD).write_text(markdown.render(summary))
    (folder / JUNIT_XML).write_bytes(junit.render(summary))
    violating = (t for r in result.invariants.values() if r.valid is False for t in r.tasks)
    involved = list(dict.fromkeys([*violating, *result.duplicate_tasks]))
    figs: dict[str, tuple[bytes | None, str]] = {}
    if len(fx.run.history):
        figs["timeline"] = figures.timeline(fx, involved, result.violations)
        figs["throughput"] = (throughput.throughput(fx), "")
        figs["generations"] = figures.generations(fx, involved, result.violations)
    figs["coverage"] = (coverage.heatmap(summary), "")
    every_task, linked = tasks.sections(fx, result.violations)
    (folder / REPORT_HTML).write_text(html.render(summary, figs, every_task, linked))
    return list(REPORT_FILES)
