"""The detection bench's figures as a table: a row per planted bug (caught fraction and median first
violation, aimed and random, and their ratios), its headers and legend, and the footer of targets,
gains and the reference queue's verdict.

Why apart from :mod:`takeover.benchmarks.detection`: that module runs and measures; this one only words
what it measured, and ``takeover bench`` and the documentation's benchmarks page render the same table
from a stored bench.json without running anything.
"""

from __future__ import annotations

import os
import sys
from typing import Any

# Issue 12's targets: every planted bug caught in at least 95 % of 10 s runs, median time to first
# violation at most 3 s. Shown beside the figures with PASS/MISS; nothing fails on them.
TARGET_CAUGHT_FRACTION = 0.95
TARGET_MEDIAN_FIRST_S = 3.0


def fmt_s(s: float | None, at_end: int = 0) -> str:
    return "-" if s is None else f"{s:.2f} s" + (" (end)" if at_end else "")


def _fmt_x(x: float | None, num: float | None) -> str:
    """A ratio; "inf" when only the denominator side is missing (random never caught it)."""
    if x is not None:
        return f"{x:.2f}x"
    return "inf" if num else "-"


def rows(fig: dict[str, Any]) -> list[list[str]]:
    """The table's cells per bug, shared by the plain table and ``takeover bench``'s rich one:
    bug, caught aimed, caught random, ratio, median aimed, median random, ratio, time target,
    verdicts (caught, time)."""
    out = []
    for name, b in fig["bugs"].items():
        rnd = b.get("random_only")
        gain = fig.get("gain", {}).get("bugs", {}).get(name, {})
        end = b["time_target"] == "at_end"
        out.append([
            name, f"{b['caught']}/{b['runs']}",
            f"{rnd['caught']}/{rnd['runs']}" if rnd else "-",
            _fmt_x(gain.get("caught_fraction"), b["caught_fraction"]) if rnd else "-",
            fmt_s(b["median_first_violation_s"], b["at_end"]),
            fmt_s(rnd["median_first_violation_s"], rnd["at_end"]) if rnd else "-",
            "-" if end or not rnd else _fmt_x(gain.get("median_first_violation"), rnd["median_first_violation_s"]),
            "at end" if end else f"<= {TARGET_MEDIAN_FIRST_S:g} s",
            "PASS" if b["caught_pass"] else "MISS", "PASS" if b["time_pass"] else "MISS",
        ])
    return out


HEADERS = ("planted bug", "caught aimed", "random", "ratio", "median first aimed", "random", "ratio",
           "time target", "caught", "time")


LEGEND = ("ratio: caught fraction aimed/random and median first violation random/aimed (above 1: the aimed "
          "faults catch the bug more often, or sooner)")


def footer(fig: dict[str, Any]) -> list[str]:
    """The lines under the table: bugs per minute per mode, the reference queue, what the time
    target means for end-only bugs, and how loaded the machine was."""
    lines = [LEGEND] if "random_only" in fig else []
    lines += [f"bugs found per minute of run time, aimed: {fig['bugs_per_minute']:.2f} ({fig['caught_runs']} of "
             f"{fig['total_runs']} runs caught their bug in {fig['run_minutes']:.1f} min of runs)"]
    rnd = fig.get("random_only")
    if rnd:
        gain = fig.get("gain", {}).get("bugs_per_minute")
        lines.append(f"bugs found per minute of run time, random only: {rnd['bugs_per_minute']:.2f} "
                     f"({rnd['caught_runs']} of {rnd['total_runs']} runs in {rnd['run_minutes']:.1f} min); "
                     f"aimed/random {_fmt_x(gain, fig['bugs_per_minute'])}")
    for label, part in (("aimed", fig), ("random only", fig.get("random_only") or {})):
        cov = part.get("model_coverage") or {}
        if cov.get("runs"):
            lines.append(f"model coverage, {label}: median {cov['median_reached']:g} of {cov['possible']} possible "
                         f"cells ({cov['median_fraction']:.0%}; {cov['min_fraction']:.0%} to {cov['max_fraction']:.0%} "
                         f"over {cov['runs']} runs)")
    # The bugs whose defect the diagnosis has a name for (the network era's have none: their invariants say it).
    named_bugs = {n: b for n, b in fig["bugs"].items() if b.get("defect", "") is not None}
    bugs = named_bugs.values()
    caught = sum(b["caught"] for b in bugs)
    if caught:
        only = sum(b.get("diagnosis_names_only_defect", 0) for b in bugs)
        named = sum(b.get("diagnosis_names_defect", 0) for b in bugs)
        wrong = [f"{n} {b.get('diagnosis_names_only_defect', 0)}/{b['caught']}" for n, b in named_bugs.items()
                 if b["caught"] and b.get("diagnosis_names_only_defect", 0) < b["caught"]]
        lines.append(f"diagnosis, aimed: named the planted defect alone in {only} of {caught} caught runs, among "
                     f"others in {named - only} more" + (f" (not alone: {', '.join(wrong)})" if wrong else ""))
    for mode, ref in fig.get("reference", {}).items():
        if ref["invalid"]:
            bad = "; ".join(f"seed {r['seed']} {r['run_dir']}: {', '.join(r['not_holding'])}" for r in ref["invalid"])
            lines.append(f"reference queue ({mode}): {ref['valid']}/{ref['runs']} VALID, RELEASE BLOCKER: {bad}")
        else:
            lines.append(f"reference queue ({mode}): {ref['valid']}/{ref['runs']} VALID (no false alarm)")
    for name, b in fig["bugs"].items():
        if b["time_target"] == "at_end":
            lines.append(f"{name}: time target 'at end': {b['time_target_reason']}")
    if "pass" in fig:
        p = fig["pass"]
        lines.append("overall: " + ", ".join(f"{k} {'PASS' if v else 'MISS'}" for k, v in p.items()))
    if "load_avg" in fig:
        lines.append(f"load average before/after: {fig['load_avg']['before']} / {fig['load_avg']['after']} "
                     f"({os.cpu_count()} cores, {fig['jobs']} run(s) at once): timing figures are noisy")
    return lines


def table(fig: dict[str, Any]) -> str:
    """The figures as plain text, one line per bug, targets with PASS/MISS."""
    t = fig["targets"]
    modes = " and random-only (every aimed fault rate 0)" if "random_only" in fig else ""
    where = f", {fig['hosts']} hosts, network faults alone" if fig.get("hosts") else ""
    lines = [f"detection power: profile {fig['profile']}{where}, {fig['seeds']} seed(s) x {fig['seconds']:g} s, "
             f"aimed{modes} (targets: caught {t['caught_fraction']}, median first violation "
             f"{t['median_first_violation_s']} s)"]
    cells = [list(HEADERS), *rows(fig)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(HEADERS))]
    lines += ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
              for r in cells]
    lines += footer(fig)
    return "\n".join(lines)


def print_detection(fig: dict[str, Any]) -> None:
    """Detection power per planted bug, aimed beside random only, each against its target."""
    from rich.console import Console
    from rich.table import Table

    t = fig["targets"]
    where = f", {fig['hosts']} hosts, the network faults alone" if fig.get("hosts") else ""
    table = Table(title=f"detection power: {fig['seeds']} seed(s) x {fig['seconds']:g} s runs, profile "
                        f"{fig['profile']}{where} (targets: caught {t['caught_fraction']}, median first violation "
                        f"{t['median_first_violation_s']} s; shown, not judged)")
    for i, col in enumerate(HEADERS):
        table.add_column(col, no_wrap=i == 0)
    for cells in rows(fig):
        table.add_row(*cells[:-2], *(_STYLED["PASS" if c == "PASS" else "MISS"] for c in cells[-2:]))
    console = Console(file=sys.stdout, width=max(120, terminal_width()))
    console.print(table)
    for line in footer(fig):
        console.print(line, markup=False)


_STYLED = {"PASS": "[green]PASS[/green]", "MISS": "[red]MISS[/red]"}


def terminal_width() -> int:
    """The terminal's columns (120 when there is none: a pipe, CI)."""
    try:
        return os.get_terminal_size().columns
    except OSError:
        return 120
