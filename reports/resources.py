"""The soak's resource figure: memory, open files and file sizes over time, from ``resources.csv``.

Why one figure with three panels: a leak shows as a line that keeps climbing while its neighbours
stay flat, and segment boundaries (where the queue, ledger and history start afresh) are easiest to
read when every panel shares the same time axis.
"""

from __future__ import annotations

import io
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PANELS = (
    ("memory (RSS, MB)", ("coordinator_rss_mb", "workers_rss_mb", "service_rss_mb")),
    ("open files", ("coordinator_fds", "workers_fds", "service_fds")),
    ("disk (MB)", ("queue_mb", "wal_mb", "ledger_mb", "history_mb", "soak_dir_mb")),
)

# Readable names: "coordinator" is the soak process itself (it runs each segment's coordinator and
# its checker), and the workers' figures are sums over all of a segment's worker processes.
LABELS = {
    "coordinator_rss_mb": "soak process", "workers_rss_mb": "workers (sum)", "service_rss_mb": "service",
    "coordinator_fds": "soak process", "workers_fds": "workers (sum)", "service_fds": "service",
    "queue_mb": "queue file", "wal_mb": "queue WAL", "ledger_mb": "ledger", "history_mb": "history",
    "soak_dir_mb": "whole soak folder",
}  # fmt: skip


def figure(rows: list[dict[str, Any]]) -> bytes | None:
    """PNG bytes of the three panels; None when there are fewer than two samples."""
    if len(rows) < 2:
        return None
    xs = [float(r["elapsed"]) / 60.0 for r in rows]
    fig, axes = plt.subplots(len(PANELS), 1, figsize=(11.5, 7.5), sharex=True)
    for ax, (title, cols) in zip(axes, PANELS, strict=True):
        for col in cols:
            ax.plot(xs, [float(r[col]) for r in rows], label=LABELS.get(col, col), linewidth=1.2)
        ax.set_ylabel(title)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        # Outside the axes, on the right: inside, the legend hid the highest series (the soak folder).
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    starts = [x for x, prev, r in zip(xs[1:], rows, rows[1:], strict=False) if r["segment"] != prev["segment"]]
    for ax in axes:
        for x in starts:
            ax.axvline(x, color="#adb5bd", linewidth=0.6, linestyle=":")
    axes[-1].set_xlabel("minutes since the soak started (dotted: a new segment or replay)")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()
