"""Reports written next to summary.json: report.md, report.html (self-contained), junit.xml."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def write_reports(folder: Path, summary: dict[str, Any], fx: Any, results: dict[str, Any],
                  dup_tasks: list[str]) -> list[str]:
    """Render every report into ``folder``; returns the file names written."""
    from takeover.reports import figures, html, junit, markdown

    (folder / "report.md").write_text(markdown.render(summary))
    (folder / "junit.xml").write_bytes(junit.render(summary))
    involved = list(dict.fromkeys(t for r in results.values() if r.valid is False for t in r.tasks))
    involved += [t for t in dup_tasks if t not in set(involved)]
    figs: dict[str, tuple[bytes | None, str]] = {}
    if len(fx.run.history):
        figs["timeline"] = figures.timeline(fx)
        figs["throughput"] = (figures.throughput(fx), "")
        figs["generations"] = figures.generations(fx, involved)
    (folder / "report.html").write_text(html.render(summary, figs))
    return ["report.md", "report.html", "junit.xml"]
