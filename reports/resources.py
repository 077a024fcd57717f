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


def figure(rows: list[dict[str, Any]]) -> bytes | None:
    """PNG bytes of the three panels; None when there are fewer than two samples."""
    if len(rows) < 2:
        return None
    xs = [float(r["elapsed"]) / 60.0 for r in rows]
    fig, axes = plt.subplots(len(PANELS), 1, figsize=(10, 7.5), sharex=True)
    for ax, (title, cols) in zip(axes, PANELS, strict=True):
        for col in cols:
            ax.plot(xs, [float(r[col]) for r in rows], label=col.removesuffix("_mb"), linewidth=1.2)
        ax.set_ylabel(title)
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", fontsize=8, ncol=len(cols))
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
