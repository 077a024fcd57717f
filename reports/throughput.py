"""The report's throughput figure: accepted finishes per second, the fault windows shaded behind, and the
run's phases (start, faults_stop, drain_end) labelled in a band above the plot (takeover.reports.figures
draws the timeline and the generations)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from takeover._internal.checker.facts import Facts  # noqa: E402
from takeover.reports.figures import FAULT_COLOURS, png, windows  # noqa: E402


def throughput(fx: Facts) -> bytes:
    """Accepted finishes per second, with the fault windows shaded behind (PNG)."""
    return png(throughput_figure(fx))


def throughput_figure(fx: Facts) -> Figure:
    """The throughput figure itself (the caller closes it): tests measure where its labels land."""
    fig, ax = plt.subplots(figsize=(12, 3.2))
    rel = fx.t0
    span = max(fx.t1 - fx.t0, 1.0)
    width = max(0.25, round(span / 120, 2))
    edges = np.arange(0, span + width, width)
    done = fx.fin_acc["t_comp"].to_numpy(dtype="float64") - rel
    hist, _ = np.histogram(done, bins=edges)
    ax.step(edges[:-1], hist / width, where="post", color="#264653", lw=1.2, label="finishes accepted / s")
    top = max(1.0, float((hist / width).max()) if len(hist) else 1.0)
    for kind in ("pause", "slow", "lose_reply"):
        w = windows(fx, kind)
        for s, e in zip(w["start"] - rel, w["end"] - rel, strict=True):
            ax.axvspan(s, max(e, s + width / 10), color=FAULT_COLOURS[kind], alpha=0.18, lw=0)
    kills = fx.ops.faults.loc[fx.ops.faults["f"] == "kill", "t_inv"] - rel
    ax.vlines(kills, 0, top * 1.05, colors=FAULT_COLOURS["kill"], lw=0.6, alpha=0.6)
    marks = list(zip(fx.ops.run_events["time"] - rel, fx.ops.run_events["value"].astype(str), strict=True))
    for t, _ in marks:
        ax.axvline(t, color="#6c757d", ls="--", lw=0.8)
    ax.set_ylim(0, top * 1.1)
    ax.set_xlim(0, span)
    rows = _phase_labels(fig, ax, marks)
    ax.set_xlabel("seconds since the run started")
    ax.set_ylabel("per second")
    ax.legend(handles=[
        Line2D([], [], color="#264653", label="finishes accepted / s"),
        Patch(color=FAULT_COLOURS["pause"], alpha=0.4, label="pause"),
        Patch(color=FAULT_COLOURS["slow"], alpha=0.4, label="slow task"),
        Patch(color=FAULT_COLOURS["lose_reply"], alpha=0.4, label="reply lost"),
        Line2D([], [], color=FAULT_COLOURS["kill"], label="SIGKILL"),
    ], loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=7, frameon=False)
    ax.set_title("Throughput with fault windows", pad=6 + 11 * rows)
    ax.grid(alpha=0.3)
    return fig


def _phase_labels(fig: Figure, ax: Axes, marks: list[tuple[float, str]]) -> int:
    """Label the run phases (start, faults_stop, drain_end, interrupted) in a band above the plot.

    Why measured placement: phases can fall a moment apart (a drain with nothing left to do ends
    right after faults stop) and the last one sits at the right edge, next to the legend. Each
    label goes right of its line, or left of it when it would pass the plot's right edge, on the
    first row where it overlaps no label already placed. Returns the number of rows used."""
    canvas = fig.canvas
    assert isinstance(canvas, FigureCanvasAgg)  # matplotlib.use("Agg") above: measuring needs its renderer
    renderer = canvas.get_renderer()
    right = ax.get_window_extent(renderer).x1
    trans = ax.get_xaxis_transform()  # x in data, y in axes fraction
    placed: list[list[tuple[float, float]]] = []
    gap = 4.0  # pixels between labels on one row
    for t, text in sorted(marks):
        label = ax.text(t, 1.0, text, transform=trans, fontsize=7, color="#6c757d", ha="left",
                        va="bottom", clip_on=False)
        box = label.get_window_extent(renderer)
        if box.x1 > right:
            label.set_horizontalalignment("right")
            box = label.get_window_extent(renderer)
        row = 0
        while row < len(placed) and any(box.x0 < b + gap and a < box.x1 + gap for a, b in placed[row]):
            row += 1
        if row == len(placed):
            placed.append([])
        placed[row].append((box.x0, box.x1))
        label.set_y(1.01 + 0.075 * row)
    return len(placed)
