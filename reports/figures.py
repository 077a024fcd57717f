"""The report's pictures, drawn from the checker's frames with matplotlib (Agg), returned as PNG bytes.

Why pictures: a stale finish or a double lease is a shape in time — two bars that overlap on one
task, a finish after the lease ran out — and people see it faster than they read it from a table.
Everything is drawn with a few vectorized calls (broken_barh, scatter) so a large run still renders
in seconds.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.artist import Artist  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch, Rectangle  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402
from matplotlib.transforms import Bbox  # noqa: E402

from takeover._internal.checker.facts import Facts  # noqa: E402
from takeover._internal.checker.ops import AIMED_FAULTS  # noqa: E402
from takeover.summary_types import Example  # noqa: E402

MAX_LANES = 40
MAX_TASKS = 12
FAULT_COLOURS = {"pause": "#f4a261", "slow": "#e9c46a", "lose_reply": "#9b5de5", "kill": "#d62828",
                 "aimed": "#6a040f", "partition": "#457b9d", "db_restart": "#6c757d", "conn_kill": "#1d3557",
                 "db_pause": "#b5838d", "db_lost_reply": "#7b2cbf",
                 "path": "#a8dadc"}
ONE_WAY = "one_way"  # a partition's shape when only the replies are lost (takeover._internal.run.net_faults)
# How the timeline labels a freeze made by an aimed fault (a pause whose ``detail`` names the fault).
AIMED_LABELS = {"expire_and_return": "S2 expire_and_return", "stale_return": "S3 stale_return"}
# Per invariant, the fields of a violation (violations.csv's row) naming the worker incarnation and the
# generation of the operation at its ``at``: the finish, claim or probe that broke the promise.
VIOLATOR = {"no_stale_commit": ("finish_by", "finish_gen"), "finish_within_lease": ("finish_by", "gen"),
            "no_reclaim_after_terminal": ("reclaimed_by", "reclaimed_gen"),
            "generation_monotonic": ("claimed_by", "gen"), "lease_exclusive": ("granted_to", "granted_gen"),
            "single_finish": ("finish_by", "gen"), "state_matches_history": ("", "gen")}
VIOLATION_COLOUR = "#d00000"
# A ring whose size is in points squared (scatter's s), not in seconds: as visible 5 ms late as 5 s late.
VIOLATION_MARK: dict[str, Any] = {"marker": "o", "s": 170, "facecolors": "none", "edgecolors": VIOLATION_COLOUR,
                                  "linewidths": 1.8, "zorder": 10, "clip_on": False}


def png(fig: Figure, dpi: int = 110) -> bytes:
    """The figure as PNG bytes, cropped to what is drawn; the figure is closed (matplotlib keeps every
    open one). Every report's figures go through here."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def holds(fx: Facts) -> pd.DataFrame:
    """Each successful claim as a held interval: from the claim to its holder's finish or death."""
    c = fx.claims_ok[["task", "gen", "process", "t_inv", "t_comp", "lease_until"]].copy()
    fin = fx.ops.finishes[["task", "gen", "process", "t_comp", "status", "accepted"]].dropna(subset=["task"])
    fin = fin.rename(columns={"t_comp": "fin_t"})
    fin = fin.drop_duplicates(["task", "gen", "process"], keep="last")
    c = c.merge(fin[["task", "gen", "process", "fin_t"]], on=["task", "gen", "process"], how="left")
    c["kill_t"] = c["process"].map(_first_kill(fx))
    end = c["fin_t"].fillna(c["kill_t"]).fillna(c["lease_until"]).fillna(fx.t1)
    c["end"] = np.maximum(end.to_numpy(dtype="float64"), c["t_comp"].to_numpy(dtype="float64"))
    return c


def _first_kill(fx: Facts) -> pd.Series:
    """The first SIGKILL aimed at each worker incarnation, by target: where its holds and fault
    windows end when nothing else closed them."""
    f = fx.ops.faults
    return f.loc[f["f"] == "kill", ["target", "t_inv"]].groupby("target")["t_inv"].min()


def windows(fx: Facts, kind: str) -> pd.DataFrame:
    """Fault windows (target, start, end); an unfinished one ends at its planned length or its
    target's death, never at the end of the run."""
    w = fx.ops.faults[fx.ops.faults["f"] == kind]
    planned = w["t_inv"] + pd.to_numeric(w["value"], errors="coerce")
    died = w["target"].map(_first_kill(fx))
    end = w["t_comp"].fillna(np.fmin(planned, died)).fillna(planned).fillna(died).fillna(fx.t1)
    return pd.DataFrame({"target": w["target"], "start": w["t_inv"], "end": end, "detail": w["detail"]})


def _network_windows(ax: Any, fx: Facts, lane: dict[Any, int], rel: float) -> list[Artist]:
    """A run with hosts (or on a Redis server of its own): a partition shades the lanes of the workers it cut
    off (hatched when one way), a database restart or freeze every lane, a connection kill is a tick on its
    worker's lane, and a path's delay or loss (the whole run's) a strip along the bottom
    (takeover._internal.checker.network). Returns the legend entries of what was drawn: none without hosts, so other
    runs' legends stay as they were."""
    from takeover._internal.checker.network import (
        CONN_KILL,
        DB_LOST_REPLY,
        DB_PAUSE,
        DB_RESTART,
        PARTITION,
        has_network,
        process_hosts,
    )

    if not has_network(fx):
        return []
    hosts = process_hosts(fx)
    f = fx.ops.faults
    end = f["t_comp"].fillna(fx.t1)
    part = f["f"] == PARTITION
    shapes = f["detail"] if "detail" in f else pd.Series("", index=f.index)
    drawn: set[str] = set()
    for start, stop, cut, shape in zip(f.loc[part, "t_inv"], end[part], f.loc[part, "host"], shapes[part],
                                       strict=True):  # fmt: skip
        one_way = shape == ONE_WAY
        for process, y in lane.items():
            if isinstance(cut, str) and hosts.get(float(process)) in cut.split(","):
                ax.broken_barh([(start - rel, stop - start)], (y - 0.5, 1.0), facecolors=FAULT_COLOURS[PARTITION],
                               alpha=0.18, edgecolors=FAULT_COLOURS[PARTITION] if one_way else "none",
                               hatch="\\\\" if one_way else None, linewidth=0, zorder=0)  # fmt: skip
                drawn.add(ONE_WAY if one_way else PARTITION)
    for kind in (DB_RESTART, DB_PAUSE):
        for start, stop in zip(f.loc[f["f"] == kind, "t_inv"], end[f["f"] == kind], strict=True):
            ax.axvspan(start - rel, stop - rel, color=FAULT_COLOURS[kind], alpha=0.15, zorder=0)
            drawn.add(kind)
    kills = f[(f["f"] == CONN_KILL) & f["target"].isin(list(lane))]
    ax.scatter(kills["t_inv"] - rel, kills["target"].map(lane), marker="x", s=50, c=FAULT_COLOURS[CONN_KILL], zorder=3)
    if len(kills):
        drawn.add(CONN_KILL)
    lost = f[(f["f"] == DB_LOST_REPLY) & f["target"].isin(list(lane)) & f["t_comp"].notna()]
    ax.scatter(lost["t_comp"] - rel, lost["target"].map(lane), marker="4", s=70, c=FAULT_COLOURS[DB_LOST_REPLY],
               zorder=3)  # fmt: skip
    if len(lost):
        drawn.add(DB_LOST_REPLY)
    path = _path_words(fx.config)
    if path:
        ax.add_patch(Rectangle((0, 0), fx.t1 - rel, 0.012, transform=ax.get_xaxis_transform(), clip_on=False,
                               facecolor=FAULT_COLOURS["path"], edgecolor="none", zorder=2))
    legend: list[Artist] = [
        *([Patch(color=FAULT_COLOURS[PARTITION], alpha=0.3, label="partition: its host cut off both ways")]
          if PARTITION in drawn else []),
        *([Patch(facecolor=FAULT_COLOURS[PARTITION], alpha=0.3, edgecolor=FAULT_COLOURS[PARTITION], hatch="\\\\",
                 label="one-way cut: requests arrive, replies lost")] if ONE_WAY in drawn else []),
        *([Patch(color=FAULT_COLOURS[DB_RESTART], alpha=0.25, label="database restart: down, every session lost")]
          if DB_RESTART in drawn else []),
        *([Patch(color=FAULT_COLOURS[DB_PAUSE], alpha=0.25, label="database frozen (SIGSTOP): every call waits")]
          if DB_PAUSE in drawn else []),
        *([Line2D([], [], marker="x", ls="", color=FAULT_COLOURS[CONN_KILL],
                  label="connection killed by the server")] if CONN_KILL in drawn else []),
        *([Line2D([], [], marker="4", ls="", color=FAULT_COLOURS[DB_LOST_REPLY],
                  label="the server's answer lost, the connection closed")] if DB_LOST_REPLY in drawn else []),
        *([Patch(color=FAULT_COLOURS["path"], label=path)] if path else []),
    ]  # fmt: skip
    return legend


def _hosts_of(fx: Facts) -> dict[float, str]:
    """`` on h2`` per worker incarnation in a run with hosts; empty otherwise (lanes keep their labels)."""
    from takeover._internal.checker.network import has_network, process_hosts

    if not has_network(fx):
        return {}
    return {p: f" on {h}" for p, h in process_hosts(fx).items() if h}


def _path_words(config: dict[str, Any]) -> str:
    """The legend's words for the delay and loss on every host's path (the whole run), or "" without them."""
    delay, loss = config.get("net_delay"), config.get("net_loss")
    parts = []
    if isinstance(delay, int | float) and delay > 0:
        parts.append(f"+{_ms(float(delay))} delay")
    if isinstance(loss, int | float) and loss > 0:
        parts.append(f"{100 * float(loss):g} % loss")
    return f"every host's path: {', '.join(parts)} each way (whole run)" if parts else ""


def violating_operations(violations: Sequence[Example]) -> pd.DataFrame:
    """The operations that broke a promise, one row each (time since the run started, worker
    incarnation, generation, task name and a short label), from the checker's violation rows; a
    violation with no time (the final snapshot's) is no operation in time and is left out."""
    rows = []
    for v in violations:
        at = v.get("at")
        if not isinstance(at, int | float):
            continue
        by, gen = VIOLATOR.get(str(v.get("invariant")), ("", "gen"))
        process, generation = v.get(by), v.get(gen)
        label = str(v.get("invariant"))
        late, overlap = v.get("late_by"), v.get("overlap_s")
        if isinstance(late, int | float):
            label += f" {_ms(late)} late"
        elif isinstance(overlap, int | float):
            label += f" {_ms(overlap)} overlap"
        rows.append({"t": float(at), "process": float(process) if isinstance(process, int | float) else np.nan,
                     "gen": float(generation) if isinstance(generation, int | float) else np.nan,
                     "task": v.get("task"), "label": label})
    return pd.DataFrame(rows, columns=["t", "process", "gen", "task", "label"]).sort_values("t", kind="stable")


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if abs(seconds) < 1 else f"{seconds:.2f} s"


def _mark_violations(ax: Axes, ops: pd.DataFrame, y: np.ndarray, labelled: int = MAX_TASKS) -> int:
    """A ring sized in points around each violating operation, drawn above everything else, and the
    first ``labelled`` of them named: a finish 5 ms past its lease is a 5 ms sliver of bar, invisible
    on a run of seconds, but its ring is as large as any. ``y`` is each row's place in data units,
    NaN for an operation without a lane (drawn on the top edge, in axes units). Returns how many
    were left unlabelled."""
    inside = ~np.isnan(y)
    if inside.any():
        ax.scatter(ops["t"].to_numpy()[inside], y[inside], gid="violating-operations", **VIOLATION_MARK)
    if (~inside).any():
        ax.scatter(ops["t"].to_numpy()[~inside], np.ones(int((~inside).sum())), transform=ax.get_xaxis_transform(),
                   gid="violating-operations-no-lane", **{**VIOLATION_MARK, "marker": "v"})
    canvas = ax.figure.canvas
    assert isinstance(canvas, FigureCanvasAgg)  # matplotlib.use("Agg") above: measuring needs its renderer
    renderer = canvas.get_renderer()
    right = ax.get_window_extent(renderer).x1
    placed: list[Bbox] = []
    for (t, label), yy in list(zip(zip(ops["t"], ops["label"], strict=True), y, strict=True))[:labelled]:
        where, coords = ((t, yy), "data") if not np.isnan(yy) else ((t, 1.0), ax.get_xaxis_transform())
        text = ax.annotate(label, where, xycoords=coords, xytext=(7, -7), textcoords="offset points", fontsize=6,
                           color=VIOLATION_COLOUR, va="top", zorder=11, gid="violating-operation-label",
                           bbox={"boxstyle": "square,pad=0.1", "facecolor": "white", "edgecolor": "none",
                                 "alpha": 0.85})
        # Below and right of its ring; left of it where it would leave the plot; lower, row by row,
        # where it would cover a label already placed (violations of one task come in bursts).
        for row in range(6):
            box = text.get_window_extent(renderer)
            if box.x1 > right and text.get_horizontalalignment() == "left":
                text.set_horizontalalignment("right")
                text.xyann = (-7, text.xyann[1])
                box = text.get_window_extent(renderer)
            if not any(box.overlaps(b) for b in placed) or row == 5:  # placed boxes carry a margin
                break
            text.xyann = (text.xyann[0], -7 - 8 * (row + 1))
        box = text.get_window_extent(renderer)
        placed.append(Bbox.from_extents(box.x0 - 4, box.y0 - 2, box.x1 + 4, box.y1 + 2))
    return max(len(ops) - labelled, 0)


def timeline(fx: Facts, tasks: Sequence[float] = (), violations: Sequence[Example] = ()) -> tuple[bytes, str]:
    """The timeline as PNG, with its note (see :func:`timeline_figure`)."""
    fig, note = timeline_figure(fx, tasks, violations)
    return png(fig), note


def timeline_figure(fx: Facts, tasks: Sequence[float] = (), violations: Sequence[Example] = ()) -> tuple[Figure, str]:
    """One lane per worker incarnation: held leases, actions, finishes, kills and pause windows.

    ``tasks`` are the tasks a violation or a duplicate involves (task codes, as the checker gives
    them): their holds are outlined and labelled with the task and generation, so the rows of the
    report's example tables can be found on the picture. Other holds stay unlabelled: a run has
    hundreds of them and names on every bar would hide the shapes. ``violations`` are the checker's
    violation rows (violations.csv): each violating operation gets a ring on its lane, on top.
    """
    procs = pd.Series(pd.concat([fx.claims_ok["process"], fx.ops.finishes["process"],
                                 fx.ops.spawns["target"]]).dropna().astype(int).unique())
    procs = procs[procs > 0]
    note = ""
    if len(procs) > MAX_LANES:
        # Prefer the incarnations the faults hit, then the busiest ones.
        hit = set(fx.ops.faults["target"].dropna().astype(int))
        busy = fx.claims_ok["process"].value_counts()
        score = procs.map(lambda p: (p in hit) * 1_000_000 + int(busy.get(p, 0)))
        keep = procs[score.sort_values(ascending=False).index[:MAX_LANES]]
        note = f"{len(procs) - MAX_LANES} of {len(procs)} incarnations not shown (faulted and busiest kept)"
        procs = keep
    procs = np.sort(procs.to_numpy())
    lane = {p: i for i, p in enumerate(procs)}
    lane_height = 0.5 if len(tasks) else 0.32  # room for task labels above and below a lane
    fig, ax = plt.subplots(figsize=(12, max(2.5, lane_height * len(procs) + 1.5)))
    rel = fx.t0
    h = holds(fx)
    h = h[h["process"].isin(lane)]
    for _, rows in h.groupby(h["process"].map(lane)):
        y = rows["process"].map(lane).iloc[0]
        start = rows["t_inv"].to_numpy() - rel
        lease_end = np.minimum(rows["end"].to_numpy(), rows["lease_until"].to_numpy()) - rel
        ax.broken_barh(list(zip(start, np.maximum(lease_end - start, 0), strict=True)), (y - 0.3, 0.6),
                       facecolors="#8ecae6", edgecolors="none")
        over = rows["end"].to_numpy() > rows["lease_until"].to_numpy()
        if over.any():
            s2 = rows["lease_until"].to_numpy()[over] - rel
            e2 = rows["end"].to_numpy()[over] - rel
            ax.broken_barh(list(zip(s2, e2 - s2, strict=True)), (y - 0.3, 0.6), facecolors="#e76f51",
                           edgecolors="none")
    for kind in ("pause", "slow"):
        w = windows(fx, kind)
        w = w[w["target"].isin(lane)]
        aimed = w["detail"].isin(AIMED_FAULTS).to_numpy(dtype=bool)
        for edge, hatch, part in ((FAULT_COLOURS[kind], "///", w[~aimed]), (FAULT_COLOURS["aimed"], "xxx", w[aimed])):
            for y, rows in part.groupby(part["target"].map(lane)):
                s = rows["start"].to_numpy() - rel
                e = rows["end"].to_numpy() - rel
                ax.broken_barh(list(zip(s, e - s, strict=True)), (y - 0.45, 0.9), facecolors="none",
                               edgecolors=edge, hatch=hatch, linewidth=0.8)
        _label_freezes(ax, w[aimed], lane, rel)
    network = _network_windows(ax, fx, lane, rel)
    _label_holds(ax, fx, h[h["task"].isin(list(tasks)[:MAX_TASKS])], lane, fig.get_figwidth())
    acts = fx.ops.actions[fx.ops.actions["process"].isin(lane)]
    ax.scatter(acts["t_inv"] - rel, acts["process"].map(lane), marker="|", s=60, c="#023047", zorder=3)
    fin = fx.ops.finishes[fx.ops.finishes["process"].isin(lane)]
    colour = np.where(fin["accepted"], "#2a9d8f", np.where(fin["rejected"], "#e63946", "#adb5bd"))
    ax.scatter(fin["t_inv"] - rel, fin["process"].map(lane), marker="o", s=14, c=colour, zorder=4)
    kills = fx.ops.faults[(fx.ops.faults["f"] == "kill") & fx.ops.faults["target"].isin(lane)]
    ax.scatter(kills["t_inv"] - rel, kills["target"].map(lane), marker="x", s=50, c="#d62828", zorder=5)
    lost = fx.ops.faults[(fx.ops.faults["f"] == "lose_reply") & fx.ops.faults["target"].isin(lane)]
    ax.scatter(lost["t_inv"] - rel, lost["target"].map(lane), marker="v", s=30, c="#9b5de5", zorder=5)
    workers = fx.ops.spawns.drop_duplicates("target").set_index("target")["worker"]
    ax.set_yticks(range(len(procs)))
    on = _hosts_of(fx)  # with hosts, each lane names its host too: the partitions shade lanes by host
    ax.set_yticklabels([f"{workers.get(p, '?')} #{p}{on.get(float(p), '')}" for p in procs], fontsize=7)
    ax.set_ylim(-0.8, len(procs) - 0.2)
    ax.invert_yaxis()
    # Last, on the final limits: the labels are placed by measuring them.
    bad = violating_operations(violations)
    unlabelled = _mark_violations(ax, bad, bad["process"].map(lane).to_numpy(dtype="float64"))
    if unlabelled:
        note = "; ".join(filter(None, [note, f"{unlabelled} more violating operation(s) ringed, not labelled"]))
    ax.set_xlabel("seconds since the run started")
    ax.set_title("Worker incarnations: leases held, actions, finishes and faults")
    ax.legend(handles=[
        Patch(color="#8ecae6", label="holding a valid lease"), Patch(color="#e76f51", label="held past its lease"),
        Patch(facecolor="none", edgecolor="#212529", label="a task in a violation or duplicate (labelled)"),
        Patch(facecolor="none", edgecolor=FAULT_COLOURS["pause"], hatch="///", label="paused (SIGSTOP)"),
        Patch(facecolor="none", edgecolor=FAULT_COLOURS["aimed"], hatch="xxx",
              label="frozen by an aimed fault (S2, S3)"),
        Patch(facecolor="none", edgecolor=FAULT_COLOURS["slow"], hatch="///", label="slow task"),
        Line2D([], [], marker="|", ls="", color="#023047", label="action"),
        Line2D([], [], marker="o", ls="", color="#2a9d8f", label="finish accepted"),
        Line2D([], [], marker="o", ls="", color="#e63946", label="finish refused"),
        Line2D([], [], marker="o", ls="", color="#adb5bd", label="finish unknown"),
        Line2D([], [], marker="x", ls="", color="#d62828", label="SIGKILL"),
        Line2D([], [], marker="v", ls="", color="#9b5de5", label="reply lost"),
        *network,
        *_violation_legend(bad),
    ], loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=7, frameon=False)
    ax.grid(axis="x", alpha=0.3)
    return fig, note


def _violation_legend(ops: pd.DataFrame) -> list[Line2D]:
    if not len(ops):
        return []
    return [Line2D([], [], marker="o", ls="", markerfacecolor="none", markeredgecolor=VIOLATION_COLOUR,
                   markeredgewidth=1.8, markersize=10, label="violating operation (labelled)")]


def _label_freezes(ax: Axes, freezes: pd.DataFrame, lane: dict[int, int], rel: float) -> None:
    """Name each aimed freeze's fault at its start, inside its lane: a handful per run, and the lanes'
    gaps are kept for the task labels."""
    for r in freezes.itertuples():
        ax.annotate(AIMED_LABELS.get(str(r.detail), str(r.detail)), (r.start - rel, lane[int(r.target)]),
                    xytext=(2, 0), textcoords="offset points", fontsize=5.5, va="center", color=FAULT_COLOURS["aimed"],
                    bbox={"boxstyle": "square,pad=0.1", "facecolor": "white", "edgecolor": "none", "alpha": 0.8},
                    zorder=8)


def _label_holds(ax: Axes, fx: Facts, holds: pd.DataFrame, lane: dict[int, int], fig_width: float) -> None:
    """Outline each of ``holds`` and name it (task and generation) just above or below its bar.

    Holds often sit side by side (a task and its takeover), so each label goes on the side of its
    lane whose room is free at its start, and when both are taken, after the label that ends first.
    Label widths are estimated from the font size and the axis scale
    (the figure is not drawn yet), which is close enough at this size.
    """
    rel = fx.t0
    span = max(fx.t1 - fx.t0, 1e-9)
    seconds_per_char = 6 * 0.6 / 72 * span / (0.8 * fig_width)  # fontsize 6, a character ~0.6 em
    # Labels live in the gaps between lanes: gap y is above lane y and below lane y - 1, so a label
    # under one lane and a label over the next one compete for the same room.
    ends: dict[int, float] = {}  # gap -> where the last label in it ends
    for r in holds.sort_values("t_inv").itertuples():
        y, start = lane[r.process], r.t_inv - rel
        ax.broken_barh([(start, max(r.end - r.t_inv, 0.0))], (y - 0.4, 0.8), facecolors="none",
                       edgecolors="#212529", linewidth=1.1, zorder=6)
        text = f"{fx.name(r.task)} g{int(r.gen)}"
        up = min((True, False), key=lambda side: max(ends.get(y if side else y + 1, -np.inf) - start, 0.0))
        gap = y if up else y + 1
        x = max(start, ends.get(gap, -np.inf))
        ends[gap] = x + (len(text) + 1) * seconds_per_char
        # The lanes run downwards (inverted axis): "above" is the smaller y.
        ax.annotate(text, (x, y - 0.4 if up else y + 0.4), xytext=(1, 1 if up else -1), textcoords="offset points",
                    fontsize=6, va="bottom" if up else "top", zorder=7)


def generations(fx: Facts, tasks: list[float], violations: Sequence[Example] = ()) -> tuple[bytes | None, str]:
    """The generation panels as PNG, with their note; none without tasks (see :func:`generations_figure`)."""
    if not tasks:
        return None, ""
    fig, note = generations_figure(fx, tasks, violations)
    return png(fig), note


def generations_figure(fx: Facts, tasks: list[float], violations: Sequence[Example] = ()) -> tuple[Figure, str]:
    """Per problem task: each generation as a bar from its claim to its end, finishes and actions on it,
    and a ring around each of its violating operations (``violations``, the checker's rows)."""
    note = f"{len(tasks) - MAX_TASKS} more task(s) not shown" if len(tasks) > MAX_TASKS else ""
    tasks = tasks[:MAX_TASKS]
    cols = 3 if len(tasks) > 2 else len(tasks)
    rows_n = int(np.ceil(len(tasks) / cols))
    fig, axes = plt.subplots(rows_n, cols, figsize=(4.2 * cols, 2.6 * rows_n), squeeze=False)
    h = holds(fx)
    ledger = fx.run.ledger
    rel = fx.t0
    bad = violating_operations(violations)
    for ax, task in zip(axes.flat, tasks, strict=False):
        mine = h[h["task"] == task]
        for r in mine.itertuples():
            ax.plot([r.t_inv - rel, min(r.end, r.lease_until) - rel], [r.gen, r.gen], lw=5, color="#8ecae6",
                    solid_capstyle="butt")
            if r.end > r.lease_until:
                ax.plot([r.lease_until - rel, r.end - rel], [r.gen, r.gen], lw=5, color="#e76f51",
                        solid_capstyle="butt")
            ax.annotate(f"#{int(r.process)}", (r.t_inv - rel, r.gen), xytext=(0, 5), textcoords="offset points",
                        fontsize=7)
        fin = fx.ops.finishes[fx.ops.finishes["task"] == task]
        colour = np.where(fin["accepted"], "#2a9d8f", np.where(fin["rejected"], "#e63946", "#adb5bd"))
        ax.scatter(fin["t_inv"] - rel, fin["gen"], c=colour, s=30, zorder=4, marker="o")
        if ledger is not None:
            la = ledger[(ledger["task"] == task) & (ledger["performed"] == 1)]
            ax.scatter(la["t"] - rel, la["gen"], marker="*", s=80, c="#ffb703", edgecolors="#023047",
                       linewidths=0.5, zorder=5)
        ax.set_title(fx.name(task), fontsize=9)
        ax.set_ylabel("generation", fontsize=8)
        ax.tick_params(labelsize=7)
        performed = la["gen"] if ledger is not None else []
        _generation_ticks(ax, [*mine["gen"], *fin["gen"], *performed])
        mine_bad = bad[bad["task"] == fx.name(task)]
        _mark_violations(ax, mine_bad, mine_bad["gen"].to_numpy(dtype="float64"), labelled=3)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(tasks):]:
        ax.set_visible(False)
    fig.legend(handles=[
        Patch(color="#8ecae6", label="lease held"), Patch(color="#e76f51", label="held past lease"),
        Line2D([], [], marker="o", ls="", color="#2a9d8f", label="finish accepted"),
        Line2D([], [], marker="o", ls="", color="#e63946", label="finish refused"),
        Line2D([], [], marker="*", ls="", color="#ffb703", label="side effect performed (ledger)"),
        *_violation_legend(bad),
    ], loc="lower center", ncol=6, fontsize=7, frameon=False, bbox_to_anchor=(0.5, -0.04))
    fig.suptitle("Generation history of tasks that broke an invariant or duplicated a side effect", fontsize=10)
    fig.tight_layout()
    return fig, note


def _generation_ticks(ax: Axes, gens: list[float]) -> None:
    """Whole generations only: a task seen in one generation got ticks at 0.96 ... 1.04 from the
    default locator, which reads as if generations were fractional."""
    known = [g for g in gens if not pd.isna(g)]
    if not known:
        return
    lo, hi = int(min(known)), int(max(known))
    if hi - lo <= 10:
        ax.set_yticks(range(lo, hi + 1))
    else:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(lo - 0.5, hi + 0.5)
