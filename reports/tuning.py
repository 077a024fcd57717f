"""``tuning.md`` and a self-contained ``tuning.html`` (plots inlined as PNG) from ``tuning.json``'s content.

It renders what the tuning concluded (:func:`takeover._internal.tune.result.tuning_json`) and decides nothing.
Why the frontier plot: a lease is a trade between duplicates (too short) and the time a dead
worker's task sits orphaned (too long); each lease the search tried is one point of that trade, with
its 95 % interval, so a reader sees where the recommendation sits and what a step either way costs.
"""

from __future__ import annotations

import base64
import html
import sys
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from takeover._internal.store import TUNE_CSV, TUNE_HTML, TUNE_JSON, TUNE_MD  # noqa: E402
from takeover.reports.figures import png  # noqa: E402

SEARCH_LABELS = {"fixed": "fixed lease", "heartbeat": "lease with heartbeat (every 0.3 lease)",
                 "fraction": "heartbeat fraction at the heartbeat lease"}
# The Alternatives' names: each alternative says its own heartbeat interval (the recommended fraction, not the
# 0.3 its lease search ran at).
ALTERNATIVE_LABELS = {"fixed": "fixed lease", "heartbeat": "lease with heartbeat"}
SEARCH_WORDS = {"fixed": "fixed-lease", "heartbeat": "lease-with-heartbeat"}
STOPPED_WORDS = {"budget": "ran out of its share of the budget", "ladder": "reached the end of its ladder",
                 "violation": "stopped at a violation"}
JUDGED = ("judged: under = the 95% upper bound is at most the target (shown good); over = the 95% lower bound is "
          "above it (shown bad); open = undecided, the next run would go there; capped = still undecided at the most "
          "tasks a point may use (its tasks column): its rate sits too close to the target to decide in an "
          "affordable number of runs, so it counts as not shown under. lease-caused = duplicates because a live "
          "holder outlived its lease, what the lease decides and the target is about; crash-caused ones (a worker "
          "killed after its action) happen at any lease and are in the remedy table.")


def _s(x: Any, unit: str = "") -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.4g}{unit}"
    return f"{x}{unit}"


def headline(data: dict[str, Any]) -> list[str]:
    """The recommendation in a few lines (what the command prints, and the top of tuning.md)."""
    if data["violations"]:
        v = data["violations"]
        return [f"NO RECOMMENDATION: the queue violated an invariant in {len(v)} run(s) (a queue bug, not a tuning "
                f"result): " + "; ".join(f"{x['violated']} at lease {x['lease']:g} s, {x['run_dir']}" for x in v[:3])]
    if data["lease"] is None:
        return ["no lease was shown under the target within the budget and the ladder: see the evidence; raise "
                "--budget, or the target"]
    hb = (f", heartbeat every {data['heartbeat']:g} s" if data["heartbeat"] is not None
          else (" (fixed lease: the queue has no extend())" if not data["has_extend"] else ""))
    lines = [f"recommended lease: {data['lease']:g} s{hb}" + _unresolved(data),
             *(f"  in the library's settings: {line}" for line in data.get("library_settings") or []),
             f"lease-caused duplicates: {_s(data['duplicates_per_1000'])} per 1000 tasks (95% upper "
             f"{_s(data['duplicates_per_1000_upper'])}; target {data['target']:g}); crash-caused at your crash rate: "
             f"{_s(data['crash_duplicates_per_1000'])} per 1000"]
    if data["duplicates_per_day"]:
        d = data["duplicates_per_day"]
        lines.append(f"per day at {d['tasks_per_hour']:g} tasks/hour: {_s(d['expected'])} duplicates "
                     f"(upper {_s(d['upper'])})")
    lines.append(f"orphan recovery (kill to takeover): p50 {_s(data['recovery_p50'], ' s')}, p99 "
                 f"{_s(data['recovery_p99'], ' s')}")
    return lines


def _unresolved(data: dict[str, Any]) -> str:
    """Why ``resolved`` is false, naming the search that did not finish: "a shorter lease may do" only when it
    is the search the recommendation rests on (a resolved lease with heartbeat beside a fixed-lease search that
    ran out of budget is resolved itself; ``resolved``, and the exit code, still say the tuning is not)."""
    if data["resolved"]:
        return ""
    if data["interrupted"]:
        return "  [NOT RESOLVED: interrupted before the search finished; a shorter lease may do]"
    searches = data.get("searches") or {}
    own = "heartbeat" if data["heartbeat"] is not None else "fixed"
    if not (searches.get(own) or {}).get("resolved"):
        shorter = "a shorter lease with this heartbeat" if own == "heartbeat" else "a shorter lease"
        return f"  [NOT RESOLVED: the search did not finish; {shorter} may do]"
    others = [name for name in SEARCH_WORDS if name != own and (searches.get(name) or {}).get("resolved") is False]
    why = "; ".join(f"the {SEARCH_WORDS[name]} alternative's search "
                    f"{STOPPED_WORDS.get(searches[name].get('stopped', ''), 'did not finish')}" for name in others)
    return (f"  [the {SEARCH_WORDS[own]} search this rests on is resolved; NOT RESOLVED overall: "
            f"{why or 'another search did not finish'}]")


def _not_resolved(data: dict[str, Any], name: str) -> str:
    stopped = ((data.get("searches") or {}).get(name) or {}).get("stopped", "")
    return f" (not resolved: its search {STOPPED_WORDS.get(stopped, 'did not finish')}; a shorter lease may do)"


def scale_line(data: dict[str, Any]) -> str | None:
    sc = data.get("scale_check")
    if not sc:
        return None
    shown = "; ".join(f"lease {p['lease']:g} s: {_s(p['per_1000'])} per 1000 (95% {_s(p['lower'])}-{_s(p['upper'])}"
                      f" against {_s(p['here_lower'])}-{_s(p['here_upper'])})" for p in sc["points"])
    if sc["agrees"]:
        return (f"scale check: at time scale {sc['time_scale']:g} (half of {data['time_scale']:g}) {shown}: agrees "
                "with the recommendation's bounds")
    hint = (f"; at the smaller scale lease {sc['moves_to']:g} s also passed" if sc.get("moves_to") is not None
            else "")
    return (f"scale check: at time scale {sc['time_scale']:g} (half of {data['time_scale']:g}) {shown}: DOES NOT "
            f"AGREE{hint}: the answer depends on the scale (the harness's own stalls are K times longer in "
            f"production units); rerun with --time-scale {sc['time_scale']:g}")


def _evidence_table(data: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    head = ["search", "lease (s)", "heartbeat fraction", "runs", "tasks", "lease-caused", "per 1000", "95% lower",
            "95% upper", "judged"]
    body = []
    for e in data["evidence"]:
        lease = e.get("lease", e["value"]) if e["search"] == "fraction" else e["value"]
        frac = e["value"] if e["search"] == "fraction" else (0.3 if e["search"] == "heartbeat" else "-")
        body.append([e["search"], _s(lease), _s(frac), _s(e["runs"]), _s(e["tasks"]), _s(e["lease_caused"]),
                     _s(e["per_1000"]), _s(e["lower"]), _s(e["upper"]), e["state"]])
    return head, body


def _remedy_table(data: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    head = ["remedy", "runs", "tasks", "all duplicates per 1000 (measured)", "95% upper",
            "crash-caused per 1000 at your crash rate"]
    body = [[name, _s(r["runs"]), _s(r["tasks"]), _s(r["all_causes_per_1000_measured"]),
             _s(r["all_causes_per_1000_upper_measured"]), _s(r["crash_duplicates_per_1000"])]
            for name, r in data["remedies"].items()]
    return head, body


def _md_table(head: list[str], body: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head), *("| " + " | ".join(r) + " |" for r in body)]


def render_markdown(data: dict[str, Any]) -> str:
    t = data["task_times"]
    lines = ["# takeover tune", "", *(f"**{x}**" if data["violations"] else x for x in headline(data)), ""]
    sl = scale_line(data)
    if sl:
        lines += [sl, ""]
    lines += ["## Inputs", "",
              f"- task times: `{t['file']}` ({t['source']}, {t['read']} read): p50 {t['p50']:g} s, p90 {t['p90']:g} s, "
              f"p99 {t['p99']:g} s, max {t['max']:g} s",
              f"- crashes: {data['failures']['crash_rate_per_hour']:g} per worker-hour; lost replies: "
              f"{data['failures']['lost_reply_rate']:g} per action",
              f"- queue `{data['queue']}` ({'has' if data['has_extend'] else 'no'} extend()); target: at most "
              f"{data['target']:g} lease-caused duplicates per 1000 tasks, by the 95% upper bound (Wilson)",
              f"- time scale {data['time_scale']:g} ({'derived' if data['time_scale_derived'] else 'given'}; the "
              f"harness's per-call latency measured {data['call_latency_ms']:g} ms); every figure here is in "
              "production seconds",
              f"- this machine's scheduler stalls: p99 {data['stall_p99_ms']:g} ms, "
              f"{data['stall_p99_production_s']:g} s in production units: a margin (lease beyond the tail, lease "
              "minus heartbeat interval) near that "
              "measures the machine, not the workload (the scale check shows whether it mattered)",
              f"- {data['runs']} runs, {data['tasks']} tasks, {data['elapsed_s']:g} s of a {data['budget_minutes']:g} "
              f"min budget{'; interrupted' if data['interrupted'] else ''}", ""]
    if data["wasted_work"]:
        w = data["wasted_work"]
        lines += [f"Wasted work at the recommendation: {_s(w['attempts_pct'])} % of attempts were not finished "
                  "(killed or taken over); the attempts among them that had reached their action threw away "
                  f"{_s(w['seconds_per_1000_tasks'])} s of work per 1000 tasks (an attempt that died before its "
                  "action counts in the first figure only: its work is not measured).", ""]
    if data["alternatives"]:
        lines += ["## Alternatives", ""]
        for name, a in data["alternatives"].items():
            lines.append(f"- {ALTERNATIVE_LABELS.get(name, name)}: lease {a['lease']:g} s"
                         + (f", heartbeat every {a['lease'] * a['heartbeat_fraction']:g} s "
                            f"({a['heartbeat_fraction']:g} lease)" if a.get("heartbeat_fraction") else "")
                         + f": {_s(a['duplicates_per_1000'])} per 1000 (upper {_s(a['duplicates_per_1000_upper'])}), "
                         f"recovery p99 {_s(a['recovery_p99'], ' s')}"
                         + ("" if a["resolved"] else _not_resolved(data, name)))
        lines.append("")
    if data["remedies"]:
        lines += ["## What each remedy leaves over (at the recommended lease)", "",
                  "Measured at the runs' kill rate (raised to measure recovery); the last column scales crash-caused "
                  "duplicates back to your crash rate.", "", *_md_table(*_remedy_table(data)), ""]
    lines += ["## Evidence", "", *_md_table(*_evidence_table(data)), "", JUDGED, "",
              f"Every run is a row of `{TUNE_CSV}` (scaled units) and a folder under `cells/`; the plots are in "
              f"`{TUNE_HTML}`, everything above in `{TUNE_JSON}`.", "", "## Reproduce", "", "```sh",
              data["command"], "```", ""]
    return "\n".join(lines)


def fig_frontier(data: dict[str, Any]) -> bytes:
    """Recovery p99 against lease-caused duplicates, one point per lease tried, with 95 % intervals."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for name, marker in (("fixed", "o"), ("heartbeat", "^")):
        pts = [e for e in data["evidence"] if e["search"] == name]
        if not pts:
            continue
        xs = [e["per_1000"] for e in pts]
        err = [[max(0.0, e["per_1000"] - e["lower"]) for e in pts], [max(0.0, e["upper"] - e["per_1000"]) for e in pts]]
        ys = [e.get("recovery_p99") for e in pts]
        shown = [(x, y, e) for x, y, e in zip(xs, ys, pts, strict=True) if y is not None]
        if shown:
            a.errorbar([x for x, _, _ in shown], [y for _, y, _ in shown],
                       xerr=[[err[0][pts.index(e)] for _, _, e in shown], [err[1][pts.index(e)] for _, _, e in shown]],
                       fmt=marker, capsize=3, label=SEARCH_LABELS[name])
            for x, y, e in shown:
                a.annotate(f"{e['value']:g}s", (x, y), fontsize=7, textcoords="offset points", xytext=(3, 3))
        b.errorbar([e["value"] for e in pts], xs, yerr=err, fmt=marker, capsize=3, label=SEARCH_LABELS[name])
    for ax in (a, b):
        ax.grid(alpha=0.3)
    a.axvline(data["target"], color="#2a9d8f", ls="-.", lw=1, label=f"target {data['target']:g}")
    b.axhline(data["target"], color="#2a9d8f", ls="-.", lw=1, label=f"target {data['target']:g}")
    if data["lease"] is not None and data["recovery_p99"] is not None:
        a.plot([data["duplicates_per_1000"]], [data["recovery_p99"]], "*", ms=16, color="#e76f51",
               label="recommended")
    a.set_xlabel("lease-caused duplicates per 1000 tasks (95% interval)")
    a.set_ylabel("orphan recovery p99 (s, production)")
    a.set_title("Frontier: recovery against duplicates")
    b.set_xscale("log")
    plain = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}")  # 20, 30, 40 rather than 2x10^1
    b.xaxis.set_major_formatter(plain)
    leases = [e["value"] for e in data["evidence"] if e["search"] != "fraction"]
    narrow = bool(leases) and max(leases) < 10 * min(leases)  # under a decade: label the minor ticks too
    b.xaxis.set_minor_formatter(plain if narrow else matplotlib.ticker.NullFormatter())
    b.set_xlabel("lease (s, production)")
    b.set_ylabel("lease-caused duplicates per 1000 tasks")
    b.set_title("The bound at each lease tried")
    a.legend(fontsize=7)
    b.legend(fontsize=7)
    return png(fig, dpi=100)


def render_html(data: dict[str, Any], png: bytes) -> str:
    def e(x: Any) -> str:
        return html.escape(str(x))

    def table(head: list[str], body: list[list[str]]) -> str:
        return ("<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in head) + "</tr>"
                + "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in body) + "</table>")

    bad = bool(data["violations"])
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>takeover tune</title><style>body{font:14px "
             "system-ui,sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse}td,th{border:1px solid "
             "#ccc;padding:3px 6px;font-size:12px}.bad{background:#ffe3e3;color:#a00;padding:.6em;border:2px solid "
             "#a00}.rec{font-size:16px}img{max-width:100%}code{background:#f4f4f4}</style></head><body>",
             "<h1>takeover tune</h1>",
             f"<div class='{'bad' if bad else 'rec'}'>" + "<br>".join(e(x) for x in headline(data)) + "</div>"]
    sl = scale_line(data)
    if sl:
        parts.append(f"<p>{e(sl)}</p>")
    md = render_markdown(data)
    inputs = md.split("## Inputs", 1)[1].split("##", 1)[0].strip().splitlines()
    parts.append("<h2>Inputs</h2><ul>" + "".join(f"<li>{e(x.lstrip('- '))}</li>" for x in inputs if x.strip())
                 + "</ul>")
    parts.append(f"<h2>Frontier and evidence</h2><img alt='frontier' src='data:image/png;base64,"
                 f"{base64.b64encode(png).decode()}'>")
    if data["remedies"]:
        parts.append("<h2>What each remedy leaves over</h2>" + table(*_remedy_table(data)))
    parts.append("<h2>Evidence</h2>" + table(*_evidence_table(data)) + f"<p>{e(JUDGED)}</p>")
    parts.append(f"<h2>Reproduce</h2><pre><code>{e(data['command'])}</code></pre></body></html>")
    return "".join(parts)


def write_tuning_report(out: Path, data: dict[str, Any]) -> list[str]:
    """Write tuning.md and tuning.html into ``out``; returns their names (tuning.json is the caller's)."""
    (out / TUNE_MD).write_text(render_markdown(data))
    (out / TUNE_HTML).write_text(render_html(data, fig_frontier(data)))
    return [TUNE_MD, TUNE_HTML]


def say(data: dict[str, Any]) -> None:
    """The recommendation on stdout; a violation (no recommendation) and a failed scale check on stderr
    (``takeover merge`` ends a tuning's shards with these lines too)."""
    stream = sys.stderr if data["violations"] else sys.stdout
    for line in headline(data):
        print(("!!! " if data["violations"] else "") + line, file=stream)
    sl = scale_line(data)
    if sl:
        print(sl if data["scale_check"]["agrees"] else f"warning: {sl}",
              file=sys.stdout if data["scale_check"]["agrees"] else sys.stderr)
    print(f"{data['runs']} runs, {data['tasks']} tasks, {data['elapsed_s']:g} s; reproduce with: {data['command']}")
