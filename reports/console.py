"""What a check prints on the terminal: the verdict first, then what broke, then where to read more."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from takeover._internal.store import VIOLATIONS_CSV, json_default
from takeover.reports.coverage import coverage_line, needs_lines, unreached_lines
from takeover.reports.words import aimed_brief, clock_brief, diagnosis_lines, feature_lines, gate_line, verdict_word
from takeover.summary_types import NOT_JUDGED

if TYPE_CHECKING:  # the reports import no part of the checker at run time
    from takeover.summary_types import Summary


def short_summary(summary: Summary, written: list[str]) -> str:
    """A few lines: the verdict, each invariant that does not hold (with one example), the counts,
    the duplicates, the remedy lines, the warnings, and the files ``written`` into the run folder."""
    lines = [f"{verdict_word(summary)}: {summary['run_dir']}"]
    if summary["inconclusive"]:
        lines.append(f"  inconclusive: {summary['inconclusive']}")
    if summary["invariants"] and all(inv.get("note") == NOT_JUDGED for inv in summary["invariants"].values()):
        # A damaged history: nothing was judged, and the one line above says why.
        lines.append(f"  wrote {', '.join(written)} in {summary['run_dir']}")
        return "\n".join(lines) + "\n"
    for name, inv in summary["invariants"].items():
        if inv["valid"] is not True:
            state = "VIOLATED" if inv["valid"] is False else "unknown"
            lines.append(f"  {name}: {state} ({inv['violations']})" + (f" - {inv.get('note')}" if inv.get(
                "note") else ""))
            if inv["examples"]:
                lines.append(f"    e.g. {json.dumps(inv['examples'][0], default=json_default)}")
    ok = sum(1 for inv in summary["invariants"].values() if inv["valid"] is True)
    lines.append(f"  invariants: {ok}/{len(summary['invariants'])} hold")
    diagnosis = diagnosis_lines(summary)
    if diagnosis:
        lines.append(f"  diagnosis (the likely defect; every violation is in {VIOLATIONS_CSV}):")
        lines += [f"    {'- ' if not line.startswith(' ') else '  '}{line.strip()}" for line in diagnosis]
    c, d = summary["counts"], summary["duplicates"]
    by = ", ".join(f"{k} {v}" for k, v in d.get("by_cause", {}).items())
    final = c.get("final_states")
    final_text = f" final {', '.join(f'{k} {v}' for k, v in final.items())};" if final else ""
    lines.append(f"  tasks {c['tasks']}:{final_text} acknowledged done {c['acknowledged']}, uncertain "
                 f"{c['uncertain']} (recovered {c['recovered']}), lost {c['lost']}; takeovers {c['takeovers']}, "
                 f"stale finishes refused {c['finishes']['rejected_stale']}")
    lines.append(f"  duplicate side effects: {d.get('tasks')} task(s), {d.get('extra_actions')} extra "
                 f"action(s)" + (f" ({by})" if by else ""))
    gate = gate_line(summary)
    if gate:
        lines.append(f"  {gate}")
    lines += [f"  {line}" for line in feature_lines(summary)]
    for brief in (aimed_brief(summary), clock_brief(summary), coverage_line(summary)):
        if brief:
            lines.append(f"  {brief}")
    lines += [f"  {line}" for line in unreached_lines(summary)]
    lines += [f"  {line}" for line in needs_lines(summary)]
    for w in summary["warnings"]:
        lines.append(f"  warning: {w}")
    lines.append(f"  wrote {', '.join(written)} in {summary['run_dir']}")
    return "\n".join(lines) + "\n"
