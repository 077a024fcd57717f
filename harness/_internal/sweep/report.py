"""The sweep's report: ``sweep.md`` and a self-contained ``sweep.html`` (plots inlined as PNG).

It renders what the sweep concluded (:class:`takeover._internal.sweep.recommend.Recommendation`) and decides
nothing itself. It lives with the sweep, not in takeover.reports: the reports render one checked run and
know no multi-run command, so they stand below them (pyproject.toml, the floors).

Why these plots: each answers one question someone choosing a lease asks — how many duplicates a
lease costs (and whether the distribution's tail explains them: the model's P(task > lease) is drawn
beside the observation), how long a dead worker's task sits orphaned, what a short lease wastes,
and whether heartbeats buy a shorter recovery without the duplicates (the frontier).
"""

from __future__ import annotations

import base64
import html
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from takeover._internal.store import SWEEP_CELLS, SWEEP_CSV, SWEEP_HTML, SWEEP_MD  # noqa: E402
from takeover._internal.sweep.recommend import Recommendation  # noqa: E402
from takeover._internal.sweep.wilson import tasks_needed  # noqa: E402
from takeover.reports.figures import png  # noqa: E402

CAUSES = (("lost_lease_per_1000", "lost_lease (outlived lease)", "#e76f51"),
          ("s5_per_1000", "s5 (killed after acting)", "#264653"),
          ("dup_per_1000", "all causes", "#8d99ae"))


def _axes(n: int, title: str) -> tuple[Any, list[Any]]:
    fig, axes = plt.subplots(1, n, figsize=(5.2 * n, 3.8), squeeze=False)
    fig.suptitle(title, y=1.04)
    return fig, list(axes[0])


def fig_duplicates(means: pd.DataFrame, target: float | None = None) -> bytes:
    """Duplicates per 1000 tasks against lease / p99 task time, by cause, model beside observation;
    error bars are the 95% Wilson intervals, so a reader sees which differences are noise."""
    fixed = means[(means["heartbeat_fraction"] == 0) & (means["remedy"] == "none")]
    dists = list(dict.fromkeys(means["distribution"]))
    fig, axes = _axes(len(dists), "Duplicate side effects per 1000 tasks (remedy none, fixed lease)")
    for ax, dist in zip(axes, dists, strict=True):
        sub = fixed[fixed["distribution"] == dist].sort_values("lease_over_p99")
        for col, label, colour in CAUSES:
            if f"{col}_hi" in sub:  # 95% Wilson interval of the pooled rate, as error bars
                err = [(sub[col] - sub[f"{col}_lo"]).clip(lower=0), (sub[f"{col}_hi"] - sub[col]).clip(lower=0)]
                ax.errorbar(sub["lease_over_p99"], sub[col], yerr=err, fmt="o-", label=f"{label} (95% CI)",
                            color=colour, capsize=3, elinewidth=1, alpha=0.9)
            else:
                ax.plot(sub["lease_over_p99"], sub[col], "o-", label=label, color=colour)
        if target is not None:
            ax.axhline(target, color="#2a9d8f", lw=1, ls="-.", label=f"target {target:g}")
        ax.plot(sub["lease_over_p99"], 1000 * sub["p_outlives_model"], "k--", label="model: 1000 x P(task > lease)")
        ax.plot(sub["lease_over_p99"], 1000 * sub["outlived_observed"], "x:", color="#e76f51",
                label="observed: attempts that lost their lease")
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())  # minor labels overlap on a short axis
        ax.set_xticks(list(sub["lease_over_p99"]), [f"{v:.2g}" for v in sub["lease_over_p99"]])
        ax.set_xlabel("lease / p99 task time")
        ax.set_ylabel("per 1000 tasks")
        ax.set_title(dist)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    return png(fig, dpi=100)


def fig_recovery(means: pd.DataFrame) -> bytes:
    """From a holder's SIGKILL to the takeover of its task."""
    fixed = means[(means["heartbeat_fraction"] == 0) & (means["remedy"] == "none")]
    fig, axes = _axes(1, "Orphan recovery: holder killed -> task taken over (fixed lease)")
    ax = axes[0]
    for dist, sub in fixed.groupby("distribution", sort=False):
        sub = sub.sort_values("lease")
        line = ax.plot(sub["lease"], sub["recovery_p99"], "o-", label=f"{dist} p99")[0]
        ax.plot(sub["lease"], sub["recovery_p50"], "s--", color=line.get_color(), label=f"{dist} p50")
    ax.set_xlabel("lease (s)")
    ax.set_ylabel("seconds from the kill")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return png(fig, dpi=100)


def fig_throughput(means: pd.DataFrame) -> bytes:
    fixed = means[(means["heartbeat_fraction"] == 0) & (means["remedy"] == "none")]
    fig, (a, b) = _axes(2, "Throughput and wasted work against lease (fixed lease)")
    for dist, sub in fixed.groupby("distribution", sort=False):
        sub = sub.sort_values("lease")
        a.plot(sub["lease"], sub["throughput_per_s"], "o-", label=dist)
        b.plot(sub["lease"], sub["wasted_attempts_pct"], "o-", label=f"{dist}: attempts not finished (%)")
        b.plot(sub["lease"], sub["wasted_work_s"], "x:", label=f"{dist}: work thrown away (s)")
    a.set_xlabel("lease (s)")
    a.set_ylabel("accepted finishes per second")
    b.set_xlabel("lease (s)")
    for ax in (a, b):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return png(fig, dpi=100)


def fig_frontier(means: pd.DataFrame) -> bytes:
    plain = means[means["remedy"] == "none"]
    dists = list(dict.fromkeys(means["distribution"]))
    fig, axes = _axes(len(dists), "Frontier: recovery latency against duplicates (remedy none)")
    for ax, dist in zip(axes, dists, strict=True):
        sub = plain[plain["distribution"] == dist]
        for hb, part in sub.groupby("heartbeat_fraction"):
            label = "fixed lease" if hb == 0 else f"heartbeat every {hb:g} lease"
            part = part.sort_values("lease")
            ax.plot(part["lost_lease_per_1000"], part["recovery_p99"], "o-" if hb == 0 else "^-", label=label)
            for r in part.itertuples():
                ax.annotate(f"{r.lease:g}s", (r.lost_lease_per_1000, r.recovery_p99), fontsize=7,
                            textcoords="offset points", xytext=(3, 3))
        ax.set_xlabel("lease-caused duplicates per 1000 tasks")
        ax.set_ylabel("orphan recovery p99 (s)")
        ax.set_title(dist)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return png(fig, dpi=100)


FIGURES: tuple[tuple[str, str, Callable[..., bytes]], ...] = (
    ("duplicates", "Duplicates against lease / p99 task time", fig_duplicates),
    ("recovery", "Orphan-recovery latency against lease", fig_recovery),
    ("throughput", "Throughput and wasted work against lease", fig_throughput),
    ("frontier", "Frontier: recovery latency against duplicate rate", fig_frontier))

REC_COLUMNS = {
    "distribution": "distribution", "p99_task_s": "p99 task (s)",
    "fixed_lease_s": "shortest fixed lease (s)", "fixed_recovery_p99_s": "its recovery p99 (s)",
    "fixed_dup_per_1000": "its lost_lease/1000", "fixed_dup_hi_per_1000": "95% upper",
    "heartbeat_lease_s": "shortest lease w/ heartbeat (s)", "heartbeat_every_s": "heartbeat every (s)",
    "heartbeat_recovery_p99_s": "its recovery p99 (s)", "heartbeat_dup_per_1000": "its lost_lease/1000",
    "heartbeat_dup_hi_per_1000": "95% upper",
    "remedies_at_lease_s": "remedies compared at lease (s)",
}


def _rec_cell(r: dict[str, Any], k: str) -> str:
    if k in ("fixed_lease_s", "heartbeat_lease_s") and r.get(k) is None:
        prefix = k.removesuffix("_lease_s")
        return r.get(f"{prefix}_verdict") or "no such mode in the grid"
    return "-" if r.get(k) is None else str(r.get(k))


def _rec_table(recs: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    extra = sorted({k for r in recs for k in r if k.startswith("left_")})
    keys = list(REC_COLUMNS) + extra
    head = [REC_COLUMNS.get(k, f"dup/1000 left by {k.removeprefix('left_')} (95% upper)") for k in keys]
    body = [[_rec_cell(r, k) for k in keys] for r in recs]
    return head, body


def _needed(target: float) -> str:
    n = tasks_needed(float(target) / 1000)
    return "infinitely many" if n is None else f">= {n}"


def recommendation_markdown(meta: dict[str, Any], rec: Recommendation) -> list[str]:
    """The recommendation section of sweep.md (its warnings apart): what the command prints too."""
    lines = ["## Recommendation", "",
             "Shortest lease whose lease-caused (`lost_lease`) duplicates are shown under the target: the 95% "
             "upper bound (Wilson score interval, seeds pooled) is at most the target at that lease and at every "
             "longer lease of the grid, with a fixed lease and with heartbeats. The point estimate is beside its "
             f"bound. With 0 duplicates observed a cell needs {_needed(meta['target'])} tasks to show the "
             "target at all; a grid with fewer says *not resolvable* instead of recommending. S5 duplicates (a "
             "kill after the action) happen at every lease, so the last columns show what each remedy leaves "
             "over (all causes) at the recommended fixed lease.", ""]
    head, body = _rec_table(rec.rows)
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return lines


def render_markdown(meta: dict[str, Any], rec: Recommendation, violations: list[dict[str, Any]]) -> str:
    means = rec.means
    lines = [f"# takeover sweep: {meta['grid']}", ""]
    if violations:
        lines += ["**INVARIANT VIOLATIONS** (a queue bug, not a tuning result):", ""]
        lines += [f"- cell `{v['cell']}` seed {v['seed']}: {v['violated']} — `{v['run_dir']}`" for v in violations]
        lines.append("")
    lines += [f"{meta['runs']} run(s) of {meta['planned']} planned, {meta['cells']} cell(s); queue "
              f"`{meta['queue']}`; target: at most {meta['target']:g} lease-caused duplicates per 1000 tasks."
              + (" **Interrupted: partial results.**" if meta.get("interrupted") else ""), ""]
    if meta.get("no_heartbeat"):
        lines += [f"Note: {meta['no_heartbeat']}", ""]
    lines += recommendation_markdown(meta, rec)
    for w in rec.warnings:
        lines += ["", f"**Warning:** {w}"]
    lines += ["", "## Cells (means over seeds and fault scales; rates pooled, with 95% bounds)", ""]
    cols = ["distribution", "lease", "remedy", "heartbeat_fraction", "runs", "n_tasks", "violations",
            "dup_per_1000", "dup_per_1000_hi", "lost_lease_per_1000", "lost_lease_per_1000_lo",
            "lost_lease_per_1000_hi", "s5_per_1000", "p_outlives_model", "outlived_observed", "recovery_p50",
            "recovery_p99", "throughput_per_s", "wasted_attempts_pct", "deduplicated", "refused"]
    cols = [c for c in cols if c in means]
    lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in means[cols].itertuples(index=False):
        lines.append("| " + " | ".join("" if pd.isna(v) else (f"{v:.4g}" if isinstance(v, float) else str(v))
                                       for v in r) + " |")
    lines += ["", f"Plots: see `{SWEEP_HTML}`. Every run's folder is under `{SWEEP_CELLS}/`; every row is in "
                  f"`{SWEEP_CSV}`.", ""]
    return "\n".join(lines)


def render_html(meta: dict[str, Any], rec: Recommendation, violations: list[dict[str, Any]],
                figs: dict[str, bytes]) -> str:
    def e(x: Any) -> str:
        return html.escape(str(x))

    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>takeover sweep {e(meta['grid'])}</title>"
             "<style>body{font:14px system-ui,sans-serif;margin:2em;max-width:1300px}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:3px 6px;font-size:12px}.bad{background:#ffe3e3;color:#a00;"
             "padding:.6em;border:2px solid #a00}img{max-width:100%}</style></head><body>",
             f"<h1>takeover sweep: {e(meta['grid'])}</h1>"]
    if violations:
        parts.append("<div class='bad'><b>INVARIANT VIOLATIONS</b> (a queue bug, not a tuning result)<ul>"
                     + "".join(f"<li>cell {e(v['cell'])} seed {e(v['seed'])}: {e(v['violated'])} — "
                               f"{e(v['run_dir'])}</li>" for v in violations) + "</ul></div>")
    parts.append(f"<p>{meta['runs']} run(s) of {meta['planned']} planned, {meta['cells']} cell(s); queue "
                 f"<code>{e(meta['queue'])}</code>; target ≤ {meta['target']:g} lease-caused duplicates per 1000 "
                 f"tasks.{' <b>Interrupted: partial results.</b>' if meta.get('interrupted') else ''}</p>")
    if meta.get("no_heartbeat"):
        parts.append(f"<p><b>Note:</b> {e(meta['no_heartbeat'])}</p>")
    head, body = _rec_table(rec.rows)
    parts.append("<h2>Recommendation</h2><table><tr>" + "".join(f"<th>{e(h)}</th>" for h in head) + "</tr>"
                 + "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in body)
                 + "</table>")
    parts.append(f"<p>Judged by the 95% upper bound (Wilson, seeds pooled) at that lease and every longer one; "
                 f"a cell needs {e(_needed(meta['target']))} tasks to show the target with 0 observed.</p>")
    parts += [f"<p class='bad'><b>Warning:</b> {e(w)}</p>" for w in rec.warnings]
    for key, title, _ in FIGURES:
        if figs.get(key):
            parts.append(f"<h2>{e(title)}</h2><img alt='{e(key)}' "
                         f"src='data:image/png;base64,{base64.b64encode(figs[key]).decode()}'>")
    parts.append("<h2>Cells (means over seeds and fault scales)</h2>"
                 + rec.means.to_html(index=False, float_format=lambda v: f"{v:.4g}", na_rep=""))
    parts.append("</body></html>")
    return "".join(parts)


def write_sweep_report(out: Path, meta: dict[str, Any], rec: Recommendation | None,
                       violations: list[dict[str, Any]]) -> list[str]:
    """Write sweep.md and sweep.html into ``out`` (``rec`` None: no run finished); returns their names."""
    if rec is None:
        (out / SWEEP_MD).write_text(f"# takeover sweep: {meta['grid']}\n\nNo run finished.\n")
        (out / SWEEP_HTML).write_text("<!doctype html><html><body><p>No run finished.</p></body></html>")
        return [SWEEP_MD, SWEEP_HTML]
    meta = {**meta, "cells": len(rec.means), "runs": rec.runs}
    means, target = rec.means, float(meta["target"])
    figs = {key: (fn(means, target) if key == "duplicates" else fn(means)) for key, _, fn in FIGURES}
    (out / SWEEP_MD).write_text(render_markdown(meta, rec, violations))
    (out / SWEEP_HTML).write_text(render_html(meta, rec, violations, figs))
    return [SWEEP_MD, SWEEP_HTML]
