"""The model coverage in words and pictures: the console's line, the reports' heat map, the planted needs.

Why: a valid verdict means "no violation in the situations this run reached". The summary's
``coverage.model`` (takeover._internal.checker.model_coverage) says which those were; this module puts the
figure next to the verdict, shows the grid (operation x state rows, caller x time columns) with the
unreached possible cells apart from the impossible ones, and names the planted bugs (and any other
bug that declares its cells) a run could not have seen.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from takeover._internal import coverage_space as cs

if TYPE_CHECKING:
    from takeover.summary_types import ModelCoverage, Summary

SHOWN = 4  # important unreached cells named on the console line, the rest counted


def model(summary: Summary) -> ModelCoverage | None:
    """The run's model coverage; None for a summary from before it was computed."""
    return summary["coverage"].get("model")


def _priority(cell_key: str) -> tuple[int, int, str]:
    """The fence's promises first: a stale or expired caller's finish or heartbeat; then a known task
    registered again, the lease's edge, any other stale or expired caller, the rest; within a rank, by
    operation in the space's order."""
    c = cs.parse(cell_key)
    late = c.caller in ("stale", "expired")
    rank = (0 if late and c.op in ("finish_done", "finish_uncertain", "extend")
            else 1 if c.op == "register" and c.state != "absent"
            else 2 if c.time == "edge" else 3 if late else 4)
    return rank, cs.OPS.index(c.op), cell_key


def coverage_line(summary: Summary) -> str | None:
    """``model coverage: 23/66 cells reached; not reached: a, b, c, d (+9 more important)``."""
    m = model(summary)
    if m is None:
        return None
    line = f"model coverage: {m['reached']}/{m['possible']} cells reached"
    missing = sorted(m["unreached_important"], key=_priority)
    if missing:
        more = f" (+{len(missing) - SHOWN} more)" if len(missing) > SHOWN else ""
        line += f"; important cells not reached: {', '.join(missing[:SHOWN])}{more}"
    if m.get("impossible_reached"):
        line += f"; {sum(m['impossible_reached'].values())} call(s) in cells the spec rules out"
    return line


WHY_SHOWN = 6  # unreached cells named with their reason on the console, the important ones first
AIMED_AT = "aim_unreached window(s) aimed at it"  # in the reason of a cell a window aimed at (checker.model_coverage)


def unreached_lines(summary: Summary, shown: int = WHY_SHOWN) -> list[str]:
    """``never reached: extend/running/stale/edge — 2 aim_unreached window(s) aimed at it; the last: missed,
    ...``: the unreached cells (those a window aimed at and missed first, then the important ones, stale and
    expired callers first among them), each with why (summary.json ``coverage.model.unreached_why``), then
    how many more."""
    m = model(summary)
    why = m.get("unreached_why") if m else None
    if not m or not why:
        return []
    important = set(m["unreached_important"])
    cells = sorted(why, key=lambda k: (AIMED_AT not in why[k], k not in important, _priority(k)))
    lines = [f"never reached: {k} — {why[k]}" for k in cells[:shown]]
    if len(cells) > shown:
        lines.append(f"never reached: {len(cells) - shown} more cell(s), each with why in summary.json "
                     "(coverage.model.unreached_why)")
    return lines


def planted_needs() -> dict[str, tuple[str, ...]]:
    """The planted bugs' cells (takeover.queues.planted.NEEDS_CELLS; the PostgreSQL ones share them)."""
    from takeover.queues.planted import NEEDS_CELLS

    return NEEDS_CELLS


def needs_lines(summary: Summary, needs: Mapping[str, Iterable[str]] | None = None, what: str = "planted bug"
                ) -> list[str]:
    """One line per bug whose cells the run never reached: ``never reached cell X (or N more), which
    planted bug Y needs``. ``needs``: name -> cells (default: the planted bugs'); a mutant's table works
    the same with ``what="mutant"``."""
    m = model(summary)
    if m is None:
        return []
    table = planted_needs() if needs is None else needs
    lines = []
    for name, cells in cs.unreached_needs(table, m["cells"]).items():
        more = f" (or any of {len(cells) - 1} more)" if len(cells) > 1 else ""
        lines.append(f"never reached cell {cells[0]}{more}, which {what} {name} needs")
    return lines


def grid(m: ModelCoverage) -> tuple[list[str], list[str], list[list[int | None]]]:
    """The heat map's rows (``op/state``), columns (``caller/time``) and values: the count in a reached
    cell, 0 in an unreached possible one, None in an impossible one. Rows of operations the queue does
    not have, and columns no possible cell uses, are left out."""
    possible = set(cs.possible(m["extensions"])) | set(m["cells"])
    rows = [f"{o}/{s}" for o in cs.OPS for s in cs.STATES
            if any(k.startswith(f"{o}/{s}/") for k in possible)]
    cols = [f"{c}/{t}" for c in cs.CALLERS for t in cs.TIMES
            if any(k.endswith(f"/{c}/{t}") for k in possible)]
    values = [[m["cells"].get(f"{r}/{c}", 0) if f"{r}/{c}" in possible else None for c in cols] for r in rows]
    return rows, cols, values


def markdown(summary: Summary) -> list[str]:
    """The report.md section: the figure, the grid as a table (``·``: possible, not reached; blank:
    impossible), the unreached important cells and the planted bugs' needs."""
    m = model(summary)
    if m is None:
        return []
    rows, cols, values = grid(m)
    out = ["", "## Model coverage", "",
           f"{m['reached']} of the {m['possible']} possible cells reached (operation x the task's state before "
           f"the call x the caller x the time against its lease; edge = within {m['tick']:g} s of its end). "
           "Counts are calls; `·` is a possible cell no call reached; blank is impossible "
           "(the reasons are below).", "",
           "| op / state | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    out += ["| " + r + " | " + " | ".join("" if v is None else "·" if v == 0 else str(v) for v in vals) + " |"
            for r, vals in zip(rows, values, strict=True)]
    if m["unreached_important"]:
        out += ["", "Important cells not reached (the spec says no there, or a lease is at its edge): "
                + ", ".join(f"`{k}`" for k in sorted(m["unreached_important"], key=_priority)) + "."]
    if m.get("unreached_why"):
        out += ["", "Why each possible cell was never reached:", "",
                *[f"- `{k}`: {why}" for k, why in m["unreached_why"].items()]]
    needs = needs_lines(summary)
    if needs:
        out += ["", *[f"- {line}" for line in needs]]
    out += ["", "Impossible cells, by reason:", "", *[f"- {n} cell(s): {why}" for why, n in m["impossible"].items()]]
    if m.get("impossible_reached"):
        out += ["", "Calls the model could not place (a queue answering outside the spec): "
                + ", ".join(f"`{k}` {n}" for k, n in m["impossible_reached"].items()) + "."]
    return out


def heatmap(summary: Summary) -> bytes | None:
    """The grid as a PNG: counts on a log colour scale, unreached possible cells hatched red, impossible
    cells grey; None for a summary without model coverage."""
    m = model(summary)
    if m is None:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import LogNorm
    from matplotlib.patches import Patch, Rectangle

    from takeover.reports.figures import png  # matplotlib and pandas: loaded only when a figure is drawn

    rows, cols, values = grid(m)
    data = np.array([[np.nan if v is None or v == 0 else v for v in r] for r in values], dtype="float64")
    fig, ax = plt.subplots(figsize=(1.0 + 0.62 * len(cols), 0.9 + 0.28 * len(rows)))
    ax.set_facecolor("white")
    top = np.nanmax(data) if np.isfinite(data).any() else 1.0
    ax.imshow(data, cmap="Blues", norm=LogNorm(vmin=0.4, vmax=max(top, 2)), aspect="auto")
    for i, r in enumerate(values):
        for j, v in enumerate(r):
            if v is None:
                ax.add_patch(Rectangle((j - .5, i - .5), 1, 1, facecolor="#d9d9d9", edgecolor="white"))
            elif v == 0:
                ax.add_patch(Rectangle((j - .5, i - .5), 1, 1, facecolor="#fde2e2", edgecolor="#d62828",
                                       hatch="///", linewidth=0.6))
            else:
                ax.text(j, i, str(v), ha="center", va="center", fontsize=6,
                        color="white" if v > np.sqrt(top) else "black")
    ax.set_xticks(range(len(cols)), cols, rotation=60, ha="right", fontsize=7)
    ax.set_yticks(range(len(rows)), rows, fontsize=7)
    ax.set_title(f"model coverage: {m['reached']}/{m['possible']} cells reached", fontsize=9)
    ax.legend(handles=[Patch(facecolor="#fde2e2", edgecolor="#d62828", hatch="///", label="possible, not reached"),
                       Patch(facecolor="#d9d9d9", label="impossible")],
              loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=7, frameon=False)
    return png(fig)
