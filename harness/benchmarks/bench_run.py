"""``takeover bench``'s measuring: every figure asked for, measured in turn, into bench.json's document.

Why here and not in the command: the command only parses its options, calls this and prints; what is
measured, in which order, at which sizes, and what the document holds is the benchmarks' own business
(takeover.benchmarks.targets for the ratios and their targets, takeover.benchmarks.detection for detection
power, takeover.benchmarks.mutation for the mutation score). Progress goes to stderr as it is measured.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from takeover._internal import db
from takeover.benchmarks.bench_file import bench_doc
from takeover.benchmarks.detection_table import print_detection
from takeover.benchmarks.others_cpu import cpu_text, is_quiet
from takeover.benchmarks.targets import (
    QUIET_LOAD,
    REDIS_PERSISTENCE_PAIRS,
    SIZES,
    SOURCES,
    evaluate,
    print_table,
    scaled,
)


@dataclass(frozen=True)
class BenchPlan:
    """What one ``takeover bench`` measures: its options, as the command parsed them."""

    only: tuple[str, ...]  # --only (empty: every figure of the database)
    quick: bool
    repeat: int
    detection: bool
    detection_seeds: int
    detection_seconds: float
    detection_jobs: int
    detection_hosts: int
    mutants: int | None  # the mutation score's sample of mutants per reference queue; None: all of them
    cluster: str | None  # --cluster: the detection runs on that dask cluster


@dataclass
class Bench:
    """What a bench measured: the ratios with their verdicts (``results``), each source's figures, and
    bench.json's document (``doc``), which holds both and every other measurement."""

    results: list[dict[str, Any]]
    figures: dict[str, dict[str, Any]]
    doc: dict[str, Any] = field(default_factory=dict)

    def loaded(self) -> list[str]:
        """The sources measured while other processes used the machine (takeover.benchmarks.others_cpu), with
        the cores they used; a source without that measure, when its 1-minute load reached QUIET_LOAD."""
        out = []
        for name, fig in self.figures.items():
            quiet = is_quiet(fig)
            if quiet is False:
                out.append(f"{name} ({cpu_text(fig)})")
            elif quiet is None and (fig.get("load_avg") or {}).get("max", 0) >= QUIET_LOAD:
                out.append(f"{name} (load {fig['load_avg']['max']:g})")
        return out


def measure_bench(plan: BenchPlan, measure: dict[str, Callable[..., dict[str, Any]]], database: str) -> Bench:
    """Measure every source of ``measure`` that ``plan`` asks for (in SOURCES' order), then the database's
    own figures and detection, mutation and fan-out when asked; the database is already served."""
    sources = plan.only or list(measure)
    quick = plan.quick
    figures: dict[str, dict[str, Any]] = {}
    for source in SOURCES:
        if source not in sources:
            continue
        size = scaled(SIZES[source][1 if quick else 0], plan.repeat)
        print(f"takeover bench: measuring {source} {size} ...", file=sys.stderr, flush=True)
        started = time.perf_counter()
        figures[source] = measure[source](**size)
        figures[source]["seconds"] = round(time.perf_counter() - started, 1)
        figures[source]["size"] = size
    results = evaluate(figures)
    doc = bench_doc(quick, results, figures)
    if database != db.DEFAULT:  # SQLite's bench.json stays as it was
        doc["db"] = db.redact(database)
        if db.kind(database) == db.REDIS:
            from takeover.benchmarks.redis import persistence_rates

            doc["redis_persistence"] = persistence_rates(REDIS_PERSISTENCE_PAIRS[1 if quick else 0] * plan.repeat)
        else:
            doc["frozen_holder"] = _frozen_holder()
    if plan.detection or "detection" in plan.only:
        doc["detection"] = detection_runs(plan)
        if plan.detection_hosts:
            doc["detection_network"] = _detection_network(plan)
    if plan.detection or "mutation" in plan.only:
        doc["mutation"] = _mutation(plan)
    if "fanout" in plan.only:
        doc["fanout"] = _fanout(quick)
    return Bench(results, figures, doc)


def print_bench(bench: Bench, quick: bool) -> None:
    """The bench's table and every other measurement's lines, on stdout."""
    doc = bench.doc
    if bench.results:  # ``--only detection`` measured nothing else
        print_table(bench.results, quick)
    if "detection" in doc:
        print_detection(doc["detection"])
    if "detection_network" in doc:
        print_detection(doc["detection_network"])
    if "fanout" in doc:
        f = doc["fanout"]
        print(f"fanout_vs_local {f['fanout_vs_local']:.3f} (target {f['target']}: "
              f"{'PASS' if f['pass'] else 'MISS'}): {f['runs']} sleep-bound runs, two local jobs "
              f"{f['local_s']} s, dask local:2 {f['cluster_s']} s; the cluster's overhead "
              f"{f['overhead_per_run_s']} s per run")  # fmt: skip
    if "mutation" in doc:
        from takeover.benchmarks.mutation import line

        for name, fig in doc["mutation"].items():
            print(line(name, fig))
    if "redis_persistence" in doc:
        print("redis persistence: the reference queue's claim+finish per second: " + ", ".join(
            f"{mode} {fig['pairs_per_s']:g}" for mode, fig in doc["redis_persistence"].items()))  # fmt: skip
    if "frozen_holder" in doc:
        ref, tx = doc["frozen_holder"]["reference"], doc["frozen_holder"]["open_transaction"]
        print(f"frozen holder: the reference queue holds no transaction across calls (others' claims took at most "
              f"{ref['longest_claim_while_frozen_ms']} ms while it was frozen; its task was taken over "
              f"{ref['takeover_after_expiry_ms']} ms after its lease ran out); a holder frozen inside a transaction "
              f"blocked a FOR UPDATE of its row {tx['for_update_waited_s']} s and hid it from SKIP LOCKED "
              f"{tx['skip_locked_missed_s']} s (idle_in_transaction_session_timeout "
              f"{tx['idle_in_transaction_session_timeout']})")  # fmt: skip


def _frozen_holder() -> dict[str, Any]:
    from takeover.benchmarks import frozen_holder

    print("takeover bench: measuring frozen_holder ...", file=sys.stderr, flush=True)
    return frozen_holder.measure()


def detection_runs(plan: BenchPlan, shard: tuple[int, int] | None = None) -> dict[str, Any]:
    """Detection power; with ``--quick`` one reliably caught bug, one seed, 3 s (proves it runs). With
    ``--cluster`` the runs are made on that dask cluster (takeover._internal.fanout), ``--detection-jobs`` ignored.
    With ``shard`` only that shard's runs, and the runs themselves, not the figures
    (:func:`takeover.benchmarks.detection.make_runs`)."""
    from takeover._internal.fanout.launch import open_launcher
    from takeover.benchmarks import detection

    bugs, seeds, seconds = (
        (["StealsLiveLeases"], 1, 3.0) if plan.quick else (None, plan.detection_seeds, plan.detection_seconds)
    )
    print(
        f"takeover bench: measuring detection ({seeds} seed(s) x {seconds:g} s per planted bug and mode, "
        f"and the reference queue) ...",
        file=sys.stderr,
        flush=True,
    )
    launcher = open_launcher(plan.cluster) if plan.cluster else None
    try:
        made = detection.make_runs(bugs, seeds, seconds, plan.detection_jobs,
                                   progress=lambda line: print(f"  {line}", file=sys.stderr, flush=True),
                                   launcher=launcher, shard=shard)  # fmt: skip
        return made if shard else detection.figures(made)
    finally:
        if launcher is not None:
            launcher.close()


def _detection_network(plan: BenchPlan) -> dict[str, Any]:
    """The network era's planted bugs (takeover.queues.planted_network) with ``--detection-hosts`` hosts, one
    run at a time (each makes its own network and server); with ``--quick`` one bug, one seed, 3 s."""
    from takeover._internal.selftest.runs import NETWORK_DURATION  # each caught in 9 of 10 runs this long
    from takeover.benchmarks import detection

    bugs, seeds, seconds = (
        (["AdvisoryLockLease"], 1, 3.0) if plan.quick else (None, plan.detection_seeds, NETWORK_DURATION)
    )
    print(
        f"takeover bench: measuring the network era's detection ({seeds} seed(s) x {seconds:g} s per planted bug, "
        f"{plan.detection_hosts} hosts, and the reference queue) ...",
        file=sys.stderr,
        flush=True,
    )
    return detection.measure(
        bugs,
        seeds,
        seconds,
        1,
        hosts=plan.detection_hosts,
        progress=lambda line: print(f"  {line}", file=sys.stderr, flush=True),
    )


def _fanout(quick: bool) -> dict[str, Any]:
    """fanout_vs_local (takeover.benchmarks.fanout); with ``--quick`` two runs (proves it runs)."""
    from takeover._internal.fanout.launch import check_cluster_extra
    from takeover.benchmarks import fanout

    check_cluster_extra()
    runs = 2 if quick else 4
    print(
        f"takeover bench: measuring fanout_vs_local ({runs} sleep-bound runs here and on local:2, in turns) ...",
        file=sys.stderr,
        flush=True,
    )
    return fanout.measure(runs)


def _mutation(plan: BenchPlan) -> dict[str, Any]:
    """The mutation score per database (SQLite, and PostgreSQL when a server can be started); ``--quick``:
    3 SQLite mutants with 3 s stress runs (proves it runs)."""
    from takeover.benchmarks import mutation

    sample, seconds = (3, 3.0) if plan.quick else (plan.mutants, 20.0)
    out: dict[str, Any] = {}
    for database in (db.SQLITE,) if plan.quick else (db.SQLITE, db.POSTGRES):
        print(
            f"takeover bench: measuring the mutation score on {database} "
            f"({'all' if sample is None else sample} mutants) ...",
            file=sys.stderr,
            flush=True,
        )
        out[database] = mutation.measure(
            database, sample, seconds, progress=lambda text: print(f"  {text}", file=sys.stderr, flush=True)
        )
    return out
