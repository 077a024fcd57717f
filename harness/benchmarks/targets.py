"""The bench's figures against their targets: which figures there are (:data:`TARGETS`), what each
measurement's size is, each figure's row (value, target, verdict, spread, load, the absolute figures behind
it), what to do about the noisy ones, and the table ``takeover bench`` prints.

Why apart from the command: ``takeover bench`` measures and prints, and the documentation's benchmarks page
(docs/gen_reference.py) words the same rows from a stored bench.json without running anything.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

from takeover._internal import db
from takeover.benchmarks.detection_table import terminal_width
from takeover.benchmarks.others_cpu import QUIET_SHARE, cpu_text
from takeover.benchmarks.timing import CPU, MISS, NOISY, PASS, verdict


@dataclass(frozen=True)
class Target:
    """One figure of bench.json: which measurement it comes from and what it must reach."""

    name: str
    source: str  # the measurement that produces it
    op: str  # ">=" or "<="
    bound: float
    unit: str = "x"
    what: str = ""
    key: str = ""  # its key in the measurement's figures, when not ``name``
    enforced: bool = True  # False: printed with PASS/MISS, but a miss does not fail the bench

    def passes(self, value: float) -> bool:
        return value >= self.bound if self.op == ">=" else value <= self.bound


TARGETS = (
    Target("queue_vs_raw", "queue_vs_raw", ">=", 0.9,
           what="reference queue vs the same SQL in a bare sqlite3 (--db postgres: psycopg; --db redis: the same Lua "
                "scripts, redis-py) loop, one process; by CPU time on SQLite"),
    # takeover's own cost: 4 workers of a real run against the queue alone in 4 processes, both measured
    # in the same rotation. The bare single-process loop is not a ceiling 4 processes on one SQLite file
    # can reach (they serialize on the write lock: the queue alone gets 0.61-0.69 of it), so
    # workers4_vs_raw is still measured and printed in this row's figures but is no longer a target.
    # The figure, kept and printed, but informational: the queue alone with one call per task on
    # the run's service reaches only 0.37-0.54 of the queue alone (measured in the same rotation), and with
    # the same round trip to a bare echo peer that records nothing (the floor, printed in the row's figures)
    # 0.65-0.83; so 0.7 is out of reach for any harness that performs the side effect in another process
    # (measured 0.30-0.43 under load, 0.30 idle: see docs/benchmarks.md, make bench). What takeover itself costs is the
    # next row: the same 4 processes, each claim+finish with one service call, without the history, the
    # phase board and the coordinator.
    Target("workers4_vs_queue4", "workers4_vs_raw", ">=", 0.7, key="workers4_vs_queue4", enforced=False,
           what="4 workers of a real stress run (history, service, no faults) vs the queue alone in 4 processes"),
    # Issue 37 asked for 0.9; out of reach while the history keeps its promise (each record one write(2) on the
    # one shared O_APPEND file, docs/history.md). The queue alone in 4 processes with its service call plus only
    # the six records a worker writes per task, nothing else of takeover's: a worker's CPU per task 136-139 ->
    # 163-167 us (medians of 8 alternated rounds, twice, load 4-10, 2026-12-03 23:31-23:41 UTC); with the
    # service's ~74 us per action that is (139 + 74) / (167 + 74) = 0.88 of the rate where the CPU bounds it.
    # (The rates' own ratio did not settle at that load: medians 0.86 and 0.94 of 8 rounds, 0.63-1.66.)
    # The rest of a worker's bookkeeping (phase board, clock, asks) is about 5 us per task in isolation
    # (docs/benchmarks.md). Measured quiet 0.85-0.88: the target stays 0.8.
    Target("workers4_vs_queue4_service", "workers4_vs_raw", ">=", 0.8,
           what="4 workers of a real stress run vs the queue alone in 4 processes with one service call per task"),
    # Issue 37 asked for 0.95; out of reach for one write(2) per record. CPU time, one process, alternated
    # turns (2026-12-03 23:21 UTC, load 3-5): the four records pre-built, only written: 0.91-0.94; built by
    # orjson from one dict, no call: 0.86-0.89; the writer: 0.81-0.84 (two benches at load 4.5 and 7: 0.833
    # IQR 0.799-0.872, 0.844 IQR 0.802-0.874). So 0.8, up from 0.75.
    Target("history_overhead", "history_overhead", ">=", 0.8,
           what="claim+finish pairs with the history recorded vs without, one process, by CPU time"),
    # The price of durability, not takeover's overhead: printed for the power-loss finding
    # (docs/howto/power-loss.md), never failing the bench (it is the disk's fsync, which no code here can change).
    Target("full_vs_normal", "full_vs_normal", ">=", 0.01, enforced=False,
           what="the reference queue with synchronous=FULL vs NORMAL (claim+finish pairs, one process)"),
    # A queue in another language, through the JSON-lines bridge (takeover._internal.bridge), against the same queue in
    # Python: in every --db postgres bench; on SQLite with --only bridge_vs_native (a plain bench needs no node).
    Target("bridge_vs_native", "bridge_vs_native", ">=", 0.5,
           what="the JavaScript reference queue through the exec: bridge vs the Python one (claim+finish pairs)"),
    # Issue 37 asked for 2; 2.5 is the bound its measurements support (docs/benchmarks.md, "The check's
    # target"): the load alone is ~1.45x the read (the parse is pyarrow's own read, 1.0x), the checking after
    # it ~0.8-0.9x, and the whole 2.21-2.32 in six bench runs at load 2-4.5 (3.0 before, 2.45-2.52 at the stop).
    Target("check_1m_vs_read", "check_1m", "<=", 2.5,
           what="load + check a 1M-event history vs only reading it (pyarrow, one thread), in user CPU time",
           key="time_ratio"),
    Target("check_1m_peak_rss_mb", "check_1m", "<=", 400.0, unit="MB",
           what="peak RSS of the checker on that history", key="check_peak_rss_mb"),
)
SOURCES = tuple(dict.fromkeys(t.source for t in TARGETS))

# (full, quick) sizes of each measurement.
# --db redis: claim+finish pairs per persistence mode (bench.json's redis_persistence), full and --quick.
REDIS_PERSISTENCE_PAIRS = (2000, 100)
SIZES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    # 20 repetitions of 5 rounds: a median of 100 rounds' ratios (timed by CPU time), about 12 s on a quiet machine.
    "queue_vs_raw": ({"pairs": 5000, "repetitions": 20}, {"pairs": 200, "repetitions": 1}),
    # 9 rounds of 3 s runs (a window of about 2.7 s, thousands of pairs), about 17 s a round on a quiet machine;
    # a round other processes disturbed is left out and made again, at most 3 times (takeover.benchmarks.rounds):
    # a 20 s stress run beside disturbs 2-3 rounds. 12 rounds at most keep make bench under 5 minutes.
    "workers4_vs_raw": ({"seconds": 3.0, "repetitions": 9, "extra": 3}, {"seconds": 2.0, "repetitions": 1}),
    "history_overhead": ({"pairs": 5000, "repetitions": 20}, {"pairs": 200, "repetitions": 1}),
    "check_1m": ({"events": 1_000_000, "repeat": 5}, {"events": 10_000, "repeat": 1}),  # 5 rounds: a median and IQR
    "full_vs_normal": ({"pairs": 1000, "repetitions": 5}, {"pairs": 50, "repetitions": 1}),
    "bridge_vs_native": ({"pairs": 3000, "repetitions": 5}, {"pairs": 100, "repetitions": 1}),
}


# The 1-minute load average below which a row measured before the others' CPU was (no ``cpu``) counts as quiet.
# Not the rule any more: the bench's own processes lift the load to 2.3-2.9 from 0.4 (takeover.benchmarks.others_cpu).
QUIET_LOAD = 2.0


def scaled(size: dict[str, Any], repeat: int) -> dict[str, Any]:
    """A measurement's size with ``repeat`` times its rounds (``repetitions``, or ``repeat`` for check_1m)."""
    return {k: v * repeat if k in ("repetitions", "repeat") else v for k, v in size.items()}


def evaluate(figures: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per target whose measurement ran: value, target, verdict, spread, load, absolute figures.

    ``value`` is the figure (the median of its rounds' ratios), ``pass`` whether it meets the target;
    ``verdict`` (added later) is PASS or MISS only when the whole interquartile range of the rounds is on
    one side of the target, "noisy" otherwise (takeover.benchmarks.timing.verdict); ``iqr``, ``range`` and
    ``rounds`` are that spread, ``when`` and ``load_avg`` when and under what load it was measured, ``cpu`` the
    cores other processes and the bench used meanwhile and ``quiet`` whether the others' were few enough for
    the row to judge anything (takeover.benchmarks.others_cpu)."""
    rows = []
    for t in TARGETS:
        fig = figures.get(t.source)
        if fig is None:
            continue
        key = t.key or t.name
        value = float(fig[key])
        iqr = fig.get(f"{key}_iqr") or [value, value]  # a figure without rounds: its value alone
        rows.append({
            "name": t.name, "value": round(value, 3), "unit": t.unit, "target": f"{t.op} {t.bound:g}",
            "pass": t.passes(value), "enforced": t.enforced, "what": t.what, "absolute": absolute(t.name, fig),
            "verdict": verdict(t.op, t.bound, iqr), "iqr": iqr, "range": fig.get(f"{key}_range") or [value, value],
            "rounds": fig.get(f"{key}_rounds", 1), "when": fig.get("when"), "load_avg": fig.get("load_avg"),
            "source": t.source, **({"cpu": fig["cpu"], "quiet": fig["cpu"]["quiet"]} if "cpu" in fig else {}),
        })  # fmt: skip
    return rows


def row_quiet(row: dict[str, Any]) -> bool:
    """Whether nothing else competed for the machine while the row was measured: other processes used less
    than QUIET_SHARE of its CPUs (takeover.benchmarks.others_cpu); for a row from before that was measured,
    a 1-minute load average below QUIET_LOAD throughout."""
    if "quiet" in row:
        return bool(row["quiet"])
    load = row.get("load_avg")
    return isinstance(load, dict) and load["max"] < QUIET_LOAD


def shown_verdict(row: dict[str, Any]) -> str:
    """The verdict a reader is shown: a row measured while other processes used the machine judges nothing
    (a MISS there is as likely the other processes' as takeover's), and says so instead."""
    if row_quiet(row):
        return row_verdict(row)
    return f"not judged: {LOADED}"


LOADED = "measured while other processes used the machine"


def row_verdict(row: dict[str, Any]) -> str:
    """A row's verdict; a row from before verdicts (kept from an older bench.json) has only ``pass``."""
    return str(row.get("verdict") or (PASS if row["pass"] else MISS))


def spread_text(row: dict[str, Any]) -> str:
    """The row's IQR and min-max over its rounds, as the table and the page show them."""
    if "iqr" not in row:
        return ""
    fmt = "{:.0f}" if row.get("unit") == "MB" else "{:.3f}"
    (q1, q3), (lo, hi) = row["iqr"], row["range"]
    return (f"IQR {fmt.format(q1)}–{fmt.format(q3)}, range {fmt.format(lo)}–{fmt.format(hi)}, "
            f"{row['rounds']} rounds")  # fmt: skip


def load_text(row: dict[str, Any]) -> str:
    """When the row was measured, the 1-minute load average meanwhile (min–max), and the cores other
    processes and the bench used meanwhile."""
    load = row.get("load_avg")
    if not load:
        return ""
    cpu = cpu_text(row)
    return f"{row.get('when', '?')}, load {load['min']:g}–{load['max']:g}" + (f"; {cpu}" if cpu else "")


def quieter(results: list[dict[str, Any]]) -> str | None:
    """What to do about the noisy rows: the command that measures them again with more rounds, alone."""
    noisy = [r for r in results if row_verdict(r) == NOISY]
    if not noisy:
        return None
    names = ", ".join(f"{r['name']} ({spread_text(r).split(',')[0]} around {r['target']})" for r in noisy)
    only = " ".join(f"--only {s}" for s in dict.fromkeys(r["source"] for r in noisy if r.get("source")))
    return (f"takeover bench: noisy, no verdict: {names}. For a quieter figure run them alone on an idle machine "
            f"(nothing else running: other processes below {QUIET_SHARE:g} of the CPUs; 1-minute load average now "
            f"{os.getloadavg()[0]:.1f}), with more rounds: takeover bench {only} --repeat 3")  # fmt: skip


def absolute(name: str, fig: dict[str, Any]) -> str:
    """The numerator and denominator behind a ratio, in words a reader can check."""
    if name == "queue_vs_raw":
        return f"queue {fig['queue_pairs_per_s']:.0f} vs raw {fig['raw_pairs_per_s']:.0f} pairs/s" + _by_cpu(
            fig, name, "queue_pairs_per_cpu_s", "raw_pairs_per_cpu_s"
        )
    if name in ("workers4_vs_queue4", "workers4_vs_queue4_service"):
        split = ", ".join(f"{k} {v:.2f}" for k, v in fig.get("workers4_split_ms", {}).items())
        # The floor of the action's cost: the round trip alone, to a peer that records nothing.
        floor = (f"the floor, the same round trip to a bare echo peer (no ledger) "
                 f"{fig['queue4_echo_pairs_per_s']:.0f}: queue4_echo_vs_queue4 "
                 f"{fig['queue4_echo_vs_queue4']:.2f}; ")  # fmt: skip
        return (f"4 workers {fig['workers4_pairs_per_s']:.0f} vs the queue alone in 4 processes "
                f"{fig['queue4_pairs_per_s']:.0f} pairs/s (steady {fig['workers4_window_s']:.1f}s); against the "
                f"bare loop {fig['raw_pairs_per_s']:.0f}: workers4_vs_raw {fig['workers4_vs_raw']:.2f}, "
                f"queue4_vs_raw {fig['queue4_vs_raw']:.2f}; the queue alone with one action per pair on the "
                f"service {fig['queue4_service_pairs_per_s']:.0f}: queue4_service_vs_queue4 "
                f"{fig['queue4_service_vs_queue4']:.2f}, workers4_vs_queue4_service "
                f"{fig['workers4_vs_queue4_service']:.2f}; {floor}per task, ms: {split}")  # fmt: skip
    if name == "history_overhead":
        return f"recorded {fig['recorded_pairs_per_s']:.0f} vs bare {fig['bare_pairs_per_s']:.0f} pairs/s" + _by_cpu(
            fig, name, "recorded_pairs_per_cpu_s", "bare_pairs_per_cpu_s"
        )
    if name == "full_vs_normal":
        return f"FULL {fig['full_pairs_per_s']:.0f} vs NORMAL {fig['normal_pairs_per_s']:.0f} pairs/s"
    if name == "bridge_vs_native":
        return (f"bridge {fig['bridge_pairs_per_s']:.0f} vs native {fig['native_pairs_per_s']:.0f} pairs/s; "
                f"{fig['per_call_overhead_us']:.0f} us per call, on {fig.get('db', db.POSTGRES)}")
    if name == "check_1m_vs_read":
        if "check_cpu_s" not in fig:  # measured before the figure was of CPU time: the wall-clock times
            return f"check {fig['check_s']:.2f}s vs read {fig['read_s']:.2f}s, {fig['events']} events"
        return (f"CPU: check {fig['check_cpu_s']:.2f}s vs read {fig['read_cpu_s']:.2f}s; wall clock: check "
                f"{fig['check_s']:.2f}s vs read {fig['read_s']:.2f}s (ratio {fig['time_ratio_wall']:.2f}); "
                f"{fig['events']} events")
    return f"read alone {fig['read_peak_rss_mb']:.0f} MB"


def _by_cpu(fig: dict[str, Any], name: str, cand: str, base: str) -> str:
    """For a figure timed by CPU time (``<name>_clock``): its rates per CPU-second and the same rounds'
    wall-clock ratio; nothing for a figure timed by the wall clock."""
    if fig.get(f"{name}_clock") != CPU:
        return ""
    return (f" (wall clock); per CPU-second, the figure's clock, {fig[cand]:.0f} vs {fig[base]:.0f}; the same rounds "
            f"by the wall clock: {fig[f'{name}_wall']:.3f}")  # fmt: skip


def print_table(results: list[dict[str, Any]], quick: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    title = "takeover bench" + (" --quick (sizes too small to judge: a smoke test)" if quick else "")
    table = Table(title=title)
    for col in ("figure", "value", "target", "", "spread (rounds)", "load", "absolute figures"):
        table.add_column(col, no_wrap=col in ("figure", "value", "target"))
    for r in results:
        shown = _VERDICT_STYLE[row_verdict(r)] + ("" if r["enforced"] else " (info)")
        value = f"{r['value']:.0f} MB" if r["unit"] == "MB" else f"{r['value']:.3f}"
        load = r.get("load_avg")
        cpu = cpu_text(r)
        table.add_row(r["name"], value, r["target"], shown, spread_text(r),
                      (f"{load['min']:g}–{load['max']:g}" if load else "") + (f"; {cpu}" if cpu else ""),
                      r["absolute"])
    Console(file=sys.stdout, width=max(120, terminal_width())).print(table)


_VERDICT_STYLE = {PASS: "[green]PASS[/green]", MISS: "[red]MISS[/red]", NOISY: "[yellow]noisy[/yellow]"}
