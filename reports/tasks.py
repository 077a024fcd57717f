"""Every violating task in report.html: one table that links each task to a section of its own, with a
small figure of the task's generations and the task's violations.

Why inline SVG written as text, and not one more matplotlib figure per task: a run with hundreds of
violating tasks needs hundreds of figures. A matplotlib figure costs about a tenth of a second to draw
and encode; an SVG of a few dozen shapes, written as a string, costs well under a millisecond, stays
sharp at any zoom and is searchable. The figure shows what the generation panel shows (one row per
generation: the lease held, then held past it, finishes, performed side effects), plus the moments
of the task's violations and of its repeated registrations, each with a tooltip.

The sections stop at :data:`MAX_SECTIONS` tasks (a run that breaks thousands of tasks breaks them
the same way, and the page has to open): the table then says how many more tasks violations.csv holds.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from takeover._internal.store import VIOLATIONS_CSV
from takeover.reports.figures import holds
from takeover.reports.words import anchor, plain

if TYPE_CHECKING:
    from takeover._internal.checker.facts import Facts
    from takeover.summary_types import Example

MAX_SECTIONS = 1000  # tasks with a section of their own
ROWS_PER_TASK = 20  # violations listed in a task's section
MAX_GENERATIONS = 60  # rows of a task's figure; the latest generations are kept
WIDTH, LEFT, RIGHT, TOP, ROW, BOTTOM = 720, 44, 12, 16, 15, 18
COLOURS = {"held": "#8ecae6", "past": "#e76f51", "accepted": "#2a9d8f", "refused": "#e63946", "unknown": "#adb5bd",
           "action": "#ffb703", "violation": "#d62828", "register": "#6c757d"}


def _e(x: Any) -> str:
    return html.escape(plain(x))


Columns = dict[str, np.ndarray]


def _by_task(frame: pd.DataFrame, codes: np.ndarray, cols: tuple[str, ...]) -> dict[float, Columns]:
    """``frame``'s ``cols`` for the rows of the given task codes, as plain arrays per task: one sort
    of the few rows involved, then slices (a pandas row loop per task costs a millisecond each)."""
    rows = frame.loc[frame["task"].isin(codes).to_numpy(dtype=bool), ["task", *cols]]
    task = rows["task"].to_numpy(dtype="float64")
    order = np.argsort(task, kind="stable")
    task = task[order]
    if not len(task):
        return {}
    arrays = {c: rows[c].to_numpy(dtype=object if c == "outcome" else "float64")[order] for c in cols}
    starts = np.flatnonzero(np.r_[True, task[1:] != task[:-1]])
    ends = np.r_[starts[1:], len(task)].astype(np.int64)
    return {float(task[a]): {c: v[a:b] for c, v in arrays.items()} for a, b in zip(starts, ends, strict=True)}


def sections(fx: Facts, violations: list[Example]) -> tuple[str, set[str]]:
    """The "every violating task" part of report.html, and the tasks that have a section (for links)."""
    per_task: dict[str, list[Example]] = {}
    for row in violations:
        if row.get("task") is not None:
            per_task.setdefault(str(row["task"]), []).append(row)
    if not per_task:
        return "", set()
    names = list(per_task)
    shown = names[:MAX_SECTIONS]
    codes = fx.names.get_indexer(pd.Index(shown, dtype=object)).astype("float64")
    hold = _by_task(holds(fx), codes, ("gen", "process", "t_inv", "end", "lease_until"))
    fin = fx.ops.finishes.dropna(subset=["task"])
    fins = _by_task(fin.assign(accepted=fin["accepted"].astype("float64"), rejected=fin["rejected"].astype("float64")),
                    codes, ("gen", "process", "t_inv", "accepted", "rejected", "outcome"))
    ledger = fx.run.ledger
    acts = _by_task(ledger[ledger["performed"] == 1], codes, ("gen", "t")) if ledger is not None else {}
    regs = fx.ops.registers.dropna(subset=["task"]).sort_values("i", kind="stable")
    again = _by_task(regs[regs["task"].duplicated()], codes, ("t_inv",))
    workers = fx.ops.spawns.drop_duplicates("target").set_index("target")["worker"]
    parts = ["<h2 id='violating-tasks'>Every violating task</h2>",
             f"<p class='note'>{len(names)} task(s) broke an invariant; each links to its own section below: its "
             "generations (one row each: lease held in blue, held past it in red, finishes as dots — green "
             "accepted, red refused, grey unknown — side effects performed as amber diamonds, violations as red "
             "marks on top, repeated registrations as dashed lines; hover for times) and its violations. The "
             f"lanes named are the timeline's. Every violation is in <code>{VIOLATIONS_CSV}</code>.</p>",
             "<table><tr><th>task</th><th>violations</th><th>patterns</th><th>first at (s)</th>"
             "<th>timeline lanes</th></tr>"]
    body: list[str] = []
    for name, code in zip(shown, codes, strict=True):
        rows = per_task[name]
        h = hold.get(float(code))
        lanes = [] if h is None else [f"{workers.get(p, '?')} #{int(p)}" for p in dict.fromkeys(h["process"].tolist())]
        times = [r["at"] for r in rows if isinstance(r.get("at"), int | float)]
        counts = _counts(f"{r['invariant']}" for r in rows)
        patterns = _counts(f"{r['invariant']}/{r['pattern']}" for r in rows)
        parts.append(f"<tr><td><a href='#{anchor(name)}'>{_e(name)}</a></td><td>{_e(counts)}</td>"
                     f"<td>{_e(patterns)}</td><td>{_e(min(times) if times else None)}</td>"
                     f"<td>{_e(', '.join(lanes))}</td></tr>")
        figure = _svg(fx, h, fins.get(float(code)), acts.get(float(code)), again.get(float(code)), rows)
        listed = rows[:ROWS_PER_TASK]
        more = (f"<p class='note'>{len(rows) - len(listed)} more violation(s) of this task in "
                f"<code>{VIOLATIONS_CSV}</code>.</p>" if len(rows) > len(listed) else "")
        body.append(f"<section id='{anchor(name)}'><h4>task <code>{_e(name)}</code> — {_e(counts)}"
                    f" <a class='note' href='#violating-tasks'>(all tasks)</a> <a class='note' href='#timeline'>"
                    f"(timeline: {_e(', '.join(lanes) or 'no lane')})</a></h4>{figure}{_rows(listed)}{more}</section>")
    parts.append("</table>")
    if len(names) > len(shown):
        parts.append(f"<p class='note'>{len(names) - len(shown)} more violating task(s) without a section: "
                     f"see <code>{VIOLATIONS_CSV}</code>.</p>")
    return "".join(parts) + "".join(body), set(shown)


def _counts(items: Iterable[str]) -> str:
    seen: dict[str, int] = {}
    for item in items:
        seen[item] = seen.get(item, 0) + 1
    return ", ".join(f"{k} {v}" for k, v in seen.items())


def _rows(rows: list[Example]) -> str:
    keys = [k for k in dict.fromkeys(k for r in rows for k in r) if k not in ("task", "generations", "processes")]
    head = "".join(f"<th>{_e(k)}</th>" for k in keys)
    body = "".join("<tr>" + "".join(f"<td>{_e(r.get(k, ''))}</td>" for k in keys) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _svg(fx: Facts, h: Columns | None, fin: Columns | None, acts: Columns | None, again: Columns | None,
         rows: list[Example]) -> str:
    """One task's generations on its own time axis (seconds since the run started)."""
    t0 = fx.t0
    gens: list[float] = []
    times: list[float] = [float(r["at"]) for r in rows if isinstance(r.get("at"), int | float)]
    for frame, col, ends in ((h, "t_inv", "end"), (fin, "t_inv", None), (acts, "t", None), (again, "t_inv", None)):
        if frame is None:
            continue
        times += (frame[col] - t0).tolist()
        if ends:
            times += (frame[ends] - t0).tolist()
        if "gen" in frame:
            gens += [g for g in frame["gen"].tolist() if g == g]
    times = [t for t in times if np.isfinite(t)]
    if not times:
        return "<p class='note'>Nothing to draw: no claim, finish or side effect of this task was recorded.</p>"
    rows_of = {g: i for i, g in enumerate(sorted(set(gens))[-MAX_GENERATIONS:])}
    lo, hi = min(times), max(times)
    pad = max((hi - lo) * 0.03, 0.005)
    lo, hi = lo - pad, hi + pad
    height = TOP + ROW * max(len(rows_of), 1) + BOTTOM

    def x(t: float) -> float:
        return round(LEFT + (t - lo) / (hi - lo) * (WIDTH - LEFT - RIGHT), 1)

    def y(gen: float) -> float:
        return TOP + ROW * rows_of[gen] + ROW / 2

    out = [f"<svg width='{WIDTH}' height='{height}' "
           f"viewBox='0 0 {WIDTH} {height}' font-family='sans-serif' font-size='9'>",
           f"<rect x='{LEFT}' y='{TOP}' width='{WIDTH - LEFT - RIGHT}' height='{height - TOP - BOTTOM}' "
           "fill='#f8f9fa'/>"]
    for gen, i in rows_of.items():
        out.append(f"<text x='{LEFT - 4}' y='{TOP + ROW * i + ROW / 2 + 3}' text-anchor='end'>g{int(gen)}</text>")
    for t in (lo + pad, hi - pad):
        out.append(f"<text x='{x(t)}' y='{height - 5}' text-anchor='middle'>{t:.3f} s</text>")
    if again is not None:
        for t in (again["t_inv"] - t0).tolist():
            out.append(f"<line x1='{x(t)}' x2='{x(t)}' y1='{TOP}' y2='{height - BOTTOM}' "
                       f"stroke='{COLOURS['register']}' stroke-dasharray='3,2'><title>registered again at {t:.3f} s"
                       "</title></line>")
    if h is not None:
        for gen, process, start, end, lease in zip(h["gen"].tolist(), h["process"].tolist(), (h["t_inv"] - t0).tolist(),
                                                   (h["end"] - t0).tolist(), (h["lease_until"] - t0).tolist(),
                                                   strict=True):
            if gen not in rows_of:
                continue
            held_to = min(end, lease) if np.isfinite(lease) else end
            tip = (f"generation {int(gen)}, worker #{int(process)}: claimed at {start:.3f} s, lease until "
                   f"{lease:.3f} s, held until {end:.3f} s")
            out.append(f"<rect x='{x(start)}' y='{y(gen) - 4}' width='{max(x(held_to) - x(start), 1)}' height='8' "
                       f"fill='{COLOURS['held']}'><title>{tip}</title></rect>")
            if np.isfinite(lease) and end > lease:
                out.append(f"<rect x='{x(lease)}' y='{y(gen) - 4}' width='{max(x(end) - x(lease), 1)}' height='8' "
                           f"fill='{COLOURS['past']}'><title>{tip}</title></rect>")
            out.append(f"<text x='{x(start)}' y='{y(gen) - 5}' font-size='7'>#{int(process)}</text>")
    if acts is not None:
        for t, gen in zip((acts["t"] - t0).tolist(), acts["gen"].tolist(), strict=True):
            if gen in rows_of:
                cx, cy = x(t), y(gen)
                out.append(f"<polygon points='{cx},{cy - 5} {cx + 4},{cy} {cx},{cy + 5} {cx - 4},{cy}' "
                           f"fill='{COLOURS['action']}' stroke='#023047' stroke-width='0.5'>"
                           f"<title>side effect performed at {t:.3f} s</title></polygon>")
    if fin is not None:
        for gen, process, t, accepted, rejected, outcome in zip(
                fin["gen"].tolist(), fin["process"].tolist(), (fin["t_inv"] - t0).tolist(), fin["accepted"].tolist(),
                fin["rejected"].tolist(), fin["outcome"].tolist(), strict=True):
            if gen not in rows_of:
                continue
            what = "accepted" if accepted else "refused" if rejected else "unknown"
            out.append(f"<circle cx='{x(t)}' cy='{y(gen)}' r='3.5' fill='{COLOURS[what]}'><title>finish "
                       f"{html.escape(str(outcome))} by #{int(process)} at {t:.3f} s: {what}</title></circle>")
    for r in rows:
        at = r.get("at")
        if isinstance(at, int | float):
            tip = html.escape(f"{r['invariant']} ({r['pattern']}) at {at:.3f} s")
            out.append(f"<polygon points='{x(at) - 4},{TOP - 9} {x(at) + 4},{TOP - 9} {x(at)},{TOP - 1}' "
                       f"fill='{COLOURS['violation']}'><title>{tip}</title></polygon>")
    out.append("</svg>")
    return "".join(out)
