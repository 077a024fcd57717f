"""report.html: one self-contained file (figures embedded as base64 PNG), readable offline and in CI."""

from __future__ import annotations

import base64
import html
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from takeover._internal.store import VIOLATIONS_CSV
from takeover.reports.coverage import coverage_line, needs_lines
from takeover.reports.markdown import CAUSE_MEANING, MEANING
from takeover.reports.words import (
    AIMED_MEANING,
    anchor,
    defects,
    feature_lines,
    missed_why,
    notes,
    plain,
    verdict_word,
)

if TYPE_CHECKING:  # the reports import no part of the checker at run time
    from takeover.summary_types import ClockCoverage, Summary, Verdict

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2em auto;max-width:1200px;color:#212529}
h1{padding:.4em .6em;border-radius:6px;color:#fff}
.valid{background:#2a9d8f}.invalid{background:#d62828}.unknown{background:#6c757d}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #dee2e6;padding:.3em .6em;
font-size:.9em;text-align:left;vertical-align:top}th{background:#f1f3f5}
.ok{color:#2a9d8f;font-weight:600}.bad{color:#d62828;font-weight:600}.unk{color:#6c757d;font-weight:600}
code,pre{background:#f1f3f5;padding:.1em .3em;border-radius:3px}pre{padding:.6em;overflow-x:auto}
img{max-width:100%;border:1px solid #dee2e6;margin:.5em 0}.note{color:#6c757d;font-size:.9em}
"""

# The page's colour and each invariant's mark, by verdict ("unknown" is the default).
VERDICT_CLASS: dict[Verdict, str] = {True: "valid", False: "invalid"}
INVARIANT_MARK: dict[Verdict, tuple[str, str]] = {True: ("ok", "holds"), False: ("bad", "VIOLATED")}


def _e(x: Any) -> str:
    return html.escape(plain(x))


def _table(rows: list[dict[str, Any]], linked: Collection[str] = ()) -> str:
    """Rows as a table; a ``task`` cell naming a task of ``linked`` links to that task's section."""
    if not rows:
        return ""
    keys = list(dict.fromkeys(k for r in rows for k in r))
    head = "".join(f"<th>{_e(k)}</th>" for k in keys)

    def cell(key: str, value: Any) -> str:
        if key == "task" and isinstance(value, str) and value in linked:
            return f"<td><a href='#{anchor(value)}'>{_e(value)}</a></td>"
        return f"<td>{_e(value)}</td>"

    body = "".join("<tr>" + "".join(cell(k, r.get(k, "")) for k in keys) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _img(png: bytes | None, alt: str) -> str:
    if not png:
        return ""
    return f'<img alt="{_e(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'


def _diagnosis(s: Summary) -> str:
    """The likely defects, each with where it showed and how to confirm it; nothing for a valid run."""
    found = defects(s)
    if not found:
        return ""
    items = [f"<li><b>{_e(d.sentence)}</b><ul>" + "".join(
        f"<li>{_e(words)}" + (f"<code>{html.escape(command)}</code>" if command else "") + "</li>"
        for words, command in notes(s, d)) + "</ul></li>" for d in found]
    return (f"<h2>Diagnosis</h2><p class='note'>What the violations point at, most first (every violation, one row "
            f"each: <code>{VIOLATIONS_CSV}</code>).</p><ul>{''.join(items)}</ul>")


def render(summary: Summary, figures: dict[str, tuple[bytes | None, str]], tasks_html: str = "",
           linked: Collection[str] = ()) -> str:
    """The page. ``tasks_html``: the section of every violating task (takeover.reports.tasks), placed
    after the figures; ``linked``: the tasks it has a section for, which the example tables link to."""
    s = summary
    cls = VERDICT_CLASS.get(s["valid"], "unknown")
    if s["failed_on_duplicates"]:
        cls = "invalid"
    cfg = s.get("config", {})
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>takeover: {_e(verdict_word(s))}</title>"
             f"<style>{CSS}</style></head><body>",
             f"<h1 class='{cls}'>{_e(verdict_word(s))}</h1>",
             f"<p>Run <code>{_e(s['run_dir'])}</code> — queue <code>{_e(cfg.get('queue', '?'))}</code>, seed "
             f"{_e(cfg.get('seed', '?'))}, profile {_e(cfg.get('profile', '?'))}, lease {_e(cfg.get('lease', '?'))} s"
             + (f", on Redis with persistence {_e(cfg['redis_persistence'])}" if cfg.get("redis_persistence") else "")
             + "</p>"]
    if s["inconclusive"]:
        parts.append(f"<p class='bad'>Inconclusive: {_e(s['inconclusive'])}</p>")
    parts.append(_diagnosis(s))
    parts.append("<h2>Invariants</h2><table><tr><th>invariant</th><th>verdict</th><th>violations</th>"
                 "<th>meaning</th></tr>")
    for name, inv in s["invariants"].items():
        mark = INVARIANT_MARK.get(inv["valid"], ("unk", "unknown"))
        parts.append(f"<tr><td><code>{name}</code></td><td class='{mark[0]}'>{mark[1]}</td>"
                     f"<td>{inv['violations']}</td><td>{_e(MEANING.get(name, ''))}</td></tr>")
    parts.append("</table>")
    for name, inv in s["invariants"].items():
        if inv["valid"] is True:
            continue
        parts.append(f"<h3><code>{name}</code></h3>")
        if inv.get("note"):
            parts.append(f"<p class='note'>{_e(inv['note'])}</p>")
        if inv["examples"] and inv["violations"] > len(inv["examples"]):
            parts.append(f"<p class='note'>The first {len(inv['examples'])} of {inv['violations']}: every one is in "
                         f"<code>{VIOLATIONS_CSV}</code>, every task under <a href='#violating-tasks'>Every violating "
                         "task</a>.</p>")
        parts.append(_table(inv["examples"], linked))
    gen_png, gen_note = figures.get("generations", (None, ""))
    if gen_png:
        parts.append("<h2>Generation history of the tasks involved</h2>" + _img(gen_png, "generations"))
        if gen_note:
            parts.append(f"<p class='note'>{_e(gen_note)}</p>")
    tl_png, tl_note = figures.get("timeline", (None, ""))
    parts.append("<h2 id='timeline'>Timeline</h2>" + _img(tl_png, "timeline"))
    if tl_note:
        parts.append(f"<p class='note'>{_e(tl_note)}</p>")
    parts.append("<h2>Throughput</h2>" + _img(figures.get("throughput", (None, ""))[0], "throughput"))
    cov_png = figures.get("coverage", (None, ""))[0]
    if cov_png:
        model = s["coverage"].get("model")
        missing = ", ".join(model["unreached_important"]) if model else ""
        parts.append("<h2 id='model-coverage'>Model coverage</h2>" + _img(cov_png, "model coverage heat map")
                     + f"<p class='note'>{_e(coverage_line(s) or '')}</p>"
                     + "".join(f"<p class='note'>{_e(line)}</p>" for line in needs_lines(s))
                     + (f"<p class='note'>Every important cell not reached: {_e(missing)}</p>" if missing else ""))
    parts.append(tasks_html)
    d = s["duplicates"]
    if s.get("remedy"):
        parts.append("<h2>Remedy, heartbeats, reconciliation</h2><ul>"
                     + "".join(f"<li>{_e(x)}</li>" for x in feature_lines(s)) + "</ul>")
    parts.append("<h2>Duplicate side effects</h2>")
    if d.get("tasks") is None:
        parts.append(f"<p>Not counted: {_e(d.get('note', 'no ledger'))}</p>")
    else:
        parts.append(f"<p>{d['tasks']} task(s), {d['extra_actions']} extra action(s).</p>")
        parts.append(_table([{"cause": k, "extra actions": v, "meaning": CAUSE_MEANING.get(k, "")}
                             for k, v in d["by_cause"].items()]))
        parts.append(_table(d.get("examples", [])))
    c = s["counts"]
    flat = {k: v for k, v in c.items() if not isinstance(v, dict)}
    flat.update({f"claims {k}": v for k, v in c["claims"].items()})
    flat.update({f"finishes {k}": v for k, v in c["finishes"].items()})
    flat["orphan recovery s (p50 / p99 / max)"] = " / ".join(plain(c["orphan_recovery_s"][k])
                                                             for k in ("p50", "p99", "max"))
    parts.append("<h2>Counts</h2>" + _table([{"what": k, "value": v} for k, v in flat.items()]))
    parts.append("<h3>Operation latency (ms)</h3>" + _table([{"op": k, **v} for k, v in c["latency_ms"].items()]))
    cov = s["coverage"]
    parts.append("<h2>Fault coverage</h2>" + _table([
        {"fault": "kill", "total": cov["kills"]["total"], "detail": {"by phase": cov["kills"]["by_phase"],
                                                                     "by aim": cov["kills"]["by_aim"]}},
        {"fault": "pause", "total": cov["pauses"]["total"], "detail": f"{cov['pauses']['past_lease']} past lease"},
        {"fault": "slow", "total": cov["slows"]["total"], "detail": f"{cov['slows']['past_lease']} past lease"},
        {"fault": "lose_reply", "total": cov["lost_replies"]["history"],
         "detail": f"{cov['lost_replies']['ledger']} in the ledger"},
        *({"fault": kind, "total": a["total"],
           "detail": f"{a['hit']} hit, missed {missed_why(a)} — {AIMED_MEANING.get(kind, '')}"}
          for kind, a in cov.get("aimed", {}).items()),
        *_clock_rows(cov.get("clock")),
    ]))
    parts.append("<h2>Warnings</h2><ul>" + "".join(f"<li>{_e(w)}</li>" for w in s["warnings"]) + "</ul>"
                 if s["warnings"] else "<h2>Warnings</h2><p>None.</p>")
    if cfg.get("command"):
        parts.append(f"<h2>Reproduce</h2><pre>{_e(str(cfg['command']))}</pre>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _clock_rows(clock: ClockCoverage | None) -> list[dict[str, Any]]:
    """The clock faults' rows of the coverage table: none in a run without them."""
    if clock is None:
        return []
    return [{"fault": kind, "total": total, "detail": f"up to {largest:g} s either way" if largest is not None else ""}
            for kind, total, largest in (("clock_skew", clock["skewed"], clock["skew_abs_max"]),
                                         ("clock_jump", clock["jumps"], clock["jump_abs_max"]))]
