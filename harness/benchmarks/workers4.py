"""``workers4_vs_raw``: 4 worker processes of a real stress run against the bare single-process loop.

Why a real run and not a synthetic multi-process loop: the question is whether takeover itself
(spawned workers publishing their phase, every operation recorded in the shared history, the
external service called once per task, the coordinator watching) can push a queue near SQLite's
own limit. So the candidate is the coordinator with a config that has every fault rate 0, zero
task time and zero local step, and enough tasks that the workers never starve; the baseline is
:func:`takeover.benchmarks.queue_raw.raw_pairs`, the queue's own SQL in one process.

The candidate's rate is read from the run's own history, during the steady state only: from the
moment every worker has completed its first claim (process start-up, imports and the first
connection are not the queue's cost) to the faults_stop record or the finish that leaves 5% of the
tasks, whichever comes first (the tail, where workers start to find the queue empty, is not the
steady state either). Candidate and baseline alternate, a round of each step per repetition (ORDER, reversed
every other round: the stress run between the queue alone and the queue with the service, on either side of
each in turn); each ratio is the median of the rounds' ratios, with its IQR and range, over the rounds no
other process disturbed (:mod:`takeover.benchmarks.rounds`: a disturbed one is left out and made again).

Beside them, in the same rounds (:mod:`takeover.benchmarks.queue4`): the queue alone in 4 processes
(the ceiling, ``workers4_vs_queue4``), the same with one action per pair on a real service
(``queue4_service_vs_queue4``: the action's cost; ``workers4_vs_queue4_service``: takeover's bookkeeping),
and the same with the round trip to a bare echo peer that records nothing (``queue4_echo_vs_queue4``: the
floor, what a run could keep of the ceiling with a service that cost nothing). Measured on the shared
2-core machine under a load of 4-12: workers4_vs_queue4 0.30-0.43, queue4_service_vs_queue4 0.37-0.54,
queue4_echo_vs_queue4 0.65-0.83, workers4_vs_queue4_service 0.60-1.02 (docs/benchmarks.md, ``make bench``).

Run it: ``python -m takeover.benchmarks.workers4 [--seconds S] [--repetitions R] [--extra E]``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import tempfile
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from takeover._internal.config import RunConfig, TaskTime
from takeover._internal.options import FAULT_KINDS
from takeover._internal.store import HISTORY_FILE
from takeover.benchmarks import queue_raw
from takeover.benchmarks.queue4 import queue4_rate
from takeover.benchmarks.rounds import Rounds
from takeover.benchmarks.timing import Sample, rate
from takeover.contract import REFERENCE_QUEUE

WORKERS = 4
WARMUP_AFTER_FIRST_CLAIMS = 0.3  # seconds after the last worker's first claim before counting
TRIES = 3  # runs of one repetition, each twice as long as the last, while start-up takes the whole run
# The steps of a round, reversed every other round: the stress run between the two figures it is compared with.
ORDER = ("queue4_echo", "queue4", "workers4", "queue4_service", "raw")
# The steps of the judged figures (workers4_vs_queue4, workers4_vs_queue4_service): a round is disturbed when
# others disturbed one of these; the other ratios are of the rounds in which both their own steps were quiet.
JUDGED = ("queue4", "workers4", "queue4_service")


class NoSteadyState(RuntimeError):
    """The run ended before its workers had all started and worked: nothing the queue did was measured."""


def bench_config(tasks: int, seconds: float, out: Path, workers: int = WORKERS, queue: str = REFERENCE_QUEUE,
                 db: str = "sqlite") -> RunConfig:
    """No faults, no task time, no local step: only the harness and the queue remain."""
    return RunConfig(
        queue=queue,
        db=db,
        profile="bench-workers4",
        workers=workers,
        tasks=tasks,
        duration=seconds,
        lease=60.0,
        seed=1,
        out=str(out),
        task_time=TaskTime(dist="fixed", mean=0.0, spread=0.0, max=0.0),
        local_step=0.0,
        poll=0.005,
        client_timeout=5.0,
        drain_timeout=5.0,
        faults={k: 0.0 for k in FAULT_KINDS},
    ).validate()


def _records(history: Path) -> Iterator[dict[str, Any]]:
    """The run's history records, skipping a torn last line (workers are stopped mid-write)."""
    with history.open("rb") as fh:
        for raw in fh:
            try:
                yield json.loads(raw)
            except ValueError:
                continue


def steady_rate(history: Path, tasks: int) -> tuple[float, int, float]:
    """Accepted finishes per second in the steady state; returns (rate, finishes counted, window s)."""
    first_claim: dict[int, float] = {}
    finishes: list[float] = []
    stop = None
    for rec in _records(history):
        f, typ = rec.get("f"), rec.get("type")
        if f == "finish" and typ == "ok":
            finishes.append(rec["time"])
        elif f == "claim" and typ == "ok":
            first_claim.setdefault(rec["process"], rec["time"])
        elif f == "run" and rec.get("value") == "faults_stop":
            stop = rec["time"]
    if len(first_claim) < 1 or len(finishes) < 10:
        raise NoSteadyState(f"workers4: the run completed only {len(finishes)} tasks; nothing to measure")
    start = max(first_claim.values()) + WARMUP_AFTER_FIRST_CLAIMS
    finishes.sort()
    tail = finishes[min(len(finishes) - 1, int(0.95 * tasks))] if len(finishes) > 0.95 * tasks else finishes[-1]
    end = min(stop, tail) if stop is not None else tail
    if end <= start:
        raise NoSteadyState("workers4: no steady state (start-up took the whole run); raise --seconds")
    n = sum(1 for t in finishes if start <= t < end)
    return n / (end - start), n, end - start


def time_split(history: Path) -> dict[str, float]:
    """Mean milliseconds a worker spends per operation (invoke to completion) and between operations.

    Why: when the ratio misses, this says where a worker's cycle goes (the queue's claim and finish,
    the round trip to the external service, or the harness between calls), from the run's own record.
    """
    started: dict[tuple[int, str], float] = {}
    last_end: dict[int, float] = {}
    total: dict[str, float] = {}
    count: dict[str, int] = {}
    for rec in _records(history):
        p, f, t = rec.get("process", 0), rec.get("f"), rec.get("time", 0.0)
        if p <= 0 or f not in ("claim", "action", "finish"):
            continue
        if rec.get("type") == "invoke":
            if p in last_end:
                total["between"] = total.get("between", 0.0) + t - last_end[p]
                count["between"] = count.get("between", 0) + 1
            started[(p, f)] = t
        elif (p, f) in started:
            total[f] = total.get(f, 0.0) + t - started.pop((p, f))
            count[f] = count.get(f, 0) + 1
            last_end[p] = t
    return {k: round(1000 * total[k] / count[k], 3) for k in ("claim", "action", "finish", "between") if count.get(k)}


def run_once(tasks: int, seconds: float, root: Path, index: int, queue: str = REFERENCE_QUEUE,
             db: str = "sqlite") -> dict[str, Any]:
    """One real stress run (coordinator, 4 workers, service), quietly; its steady-state rate.

    Why a run may be made again: on a loaded machine starting 4 worker processes can take longer than
    a short run (``--quick``'s 2 s), which then has no steady state at all. The window is measured
    from the last worker's first claim, so a longer run measures the same thing; after TRIES runs the
    last one's error stands.
    """
    attempt = 0
    while True:
        try:
            return _run_once(tasks, seconds * 2**attempt, root / f"run{index}" / f"try{attempt}", queue, db)
        except NoSteadyState:
            attempt += 1
            if attempt == TRIES:
                raise


def _run_once(tasks: int, seconds: float, run_dir: Path, queue: str, db: str) -> dict[str, Any]:
    from takeover._internal.run.coordinator import Coordinator
    from takeover._internal.stress_run import coordinator_for

    run_dir.mkdir(parents=True)
    cfg = bench_config(tasks, seconds, run_dir, queue=queue, db=db)
    coordinator: Coordinator | None = None
    asked = 0  # the stop request skip_drain made itself (1), beside the signals the run's supervisor took

    def skip_drain(progress: Any) -> None:
        # The steady state ends with the faulted phase; the tasks left over are not worth draining.
        # Stopping the way a first Ctrl-C does (request_stop) ends the run cleanly at once.
        nonlocal asked
        if progress.stage == "drain" and coordinator is not None and not coordinator.signals:
            asked = 1
            coordinator.request_stop()

    coordinator = coordinator_for(cfg, run_dir, on_progress=skip_drain)
    with contextlib.redirect_stdout(io.StringIO()):
        coordinator.run()
    if coordinator.signals > asked:
        # The run's supervisor takes SIGINT, SIGTERM and SIGHUP while it runs, as a stop request: the run
        # stopped, its children reaped, but the bench would go on to its next step as if nothing had come
        # (a Ctrl-C was lost). Raised again here, it ends the bench as it ends every other command.
        raise KeyboardInterrupt
    pairs_per_s, counted, window = steady_rate(run_dir / HISTORY_FILE, tasks)
    split = time_split(run_dir / HISTORY_FILE)
    return {"rate": pairs_per_s, "counted": counted, "window": window, "split": split}


def measure(seconds: float = 4.0, repetitions: int = 3, raw_pairs: int = 5000, *, fresh_queues: Any = None,
            raw_loop: Callable[[Any, int], int] = queue_raw.raw_pairs, queue: str = REFERENCE_QUEUE,
            db: str = "sqlite", extra: int = 0) -> dict[str, Any]:  # fmt: skip
    """Return the ratio (workers4 / raw) with its absolute figures, medians of ``repetitions`` quiet rounds.

    ``fresh_queues``, ``raw_loop``, ``queue`` and ``db`` are the database's (SQLite's by default;
    takeover.benchmarks.postgres gives PostgreSQL's, run inside a serve of its server).

    Beside it, in the same rounds, the queue alone in 4 processes (:mod:`takeover.benchmarks.queue4`):
    the most the 4 workers could reach if takeover cost nothing; and the same with one action per
    pair on a real service: the most they could reach if only takeover's bookkeeping (history,
    phase board, coordinator) cost nothing. The two split the gap into the action's cost and the
    bookkeeping's. And the same with the round trip to a bare echo peer (no ledger): the floor of the
    action's cost, what no service could make cheaper.

    A round during which other processes used the machine is left out and made again, at most ``extra``
    times (:class:`takeover.benchmarks.rounds.Rounds`); the stress run sits between the two it is compared
    with (the queue alone, and with the service), on either side of each in turn.
    """
    runs: list[dict[str, Any]] = []
    fresh_queues = fresh_queues or queue_raw.FreshQueues
    with fresh_queues(raw_pairs + 10) as fresh, tempfile.TemporaryDirectory(prefix="takeover-bench-w4-") as d:

        def prepare_raw() -> Callable[[], int]:
            return partial(raw_loop, fresh.raw(), raw_pairs)

        def stress_run() -> float:
            runs.append(run_once(tasks, seconds, Path(d), len(runs), queue, db))
            return float(runs[-1]["rate"])

        rate(prepare_raw)  # warm-up
        guess = rate(prepare_raw)  # sizes the task lists as if 4 processes could match the raw loop
        # Enough tasks that nobody runs dry inside the window (the leftovers are not drained).
        tasks = int(guess * 1.3 * seconds) + 500
        with fresh_queues(tasks) as fresh4:
            steps = {
                "queue4_echo": lambda: queue4_rate(fresh4.path(), seconds, echo=True, queue=queue),
                "queue4": lambda: queue4_rate(fresh4.path(), seconds, queue=queue),
                "workers4": stress_run,
                "queue4_service": lambda: queue4_rate(fresh4.path(), seconds, service=True, queue=queue),
                "raw": lambda: rate(prepare_raw),
            }
            rounds = Rounds(steps, ORDER, key=JUDGED).run(repetitions, extra)
    counted = {id(r) for r in rounds.counted}
    kept = [run for run, r in zip(runs, rounds.done, strict=True) if id(r) in counted]  # their runs' details
    w4, raw, q4, q4s, q4e = (Sample(rounds.rates(name)) for name in
                             ("workers4", "raw", "queue4", "queue4_service", "queue4_echo"))  # fmt: skip
    ratios = {"workers4_vs_raw": rounds.ratio("workers4", "raw"), "queue4_vs_raw": rounds.ratio("queue4", "raw"),
              "workers4_vs_queue4": rounds.ratio("workers4", "queue4"),
              "queue4_service_vs_queue4": rounds.ratio("queue4_service", "queue4"),
              "workers4_vs_queue4_service": rounds.ratio("workers4", "queue4_service"),
              "queue4_echo_vs_queue4": rounds.ratio("queue4_echo", "queue4")}  # fmt: skip
    return {
        "workers4_vs_raw": ratios["workers4_vs_raw"].median,
        "workers4_pairs_per_s": w4.median,
        "raw_pairs_per_s": raw.median,
        "queue4_pairs_per_s": q4.median,
        "queue4_vs_raw": ratios["queue4_vs_raw"].median,  # SQLite's multi-process ceiling, nothing of takeover's
        "workers4_vs_queue4": ratios["workers4_vs_queue4"].median,  # takeover's own cost on top of that ceiling
        # the same ceiling when each pair also acts once on a real service, and what takeover's bookkeeping keeps of it
        "queue4_service_pairs_per_s": q4s.median,
        "queue4_service_vs_queue4": ratios["queue4_service_vs_queue4"].median,
        "workers4_vs_queue4_service": ratios["workers4_vs_queue4_service"].median,
        # the floor of the action's cost: the same round trip to a bare echo peer (no ledger), the most a run
        # could keep of queue4 with a service that costs nothing (workers4_vs_queue4 cannot reach it)
        "queue4_echo_pairs_per_s": q4e.median,
        "queue4_echo_vs_queue4": ratios["queue4_echo_vs_queue4"].median,
        "workers4_vs_raw_spread": max(w4.spread, raw.spread, q4.spread, q4s.spread, q4e.spread),
        "workers4_window_s": statistics.median(r["window"] for r in kept),
        # from the median run: where a worker's claim -> action -> finish cycle goes, in ms
        "workers4_split_ms": sorted(kept, key=lambda r: r["rate"])[len(kept) // 2]["split"],
        # each ratio's spread over the rounds (the medians above are of the rounds' ratios)
        **{k: v for name, spread in ratios.items() for k, v in spread.keys(name).items()},
        **rounds.figures(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="faulted-phase length of each run")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--extra", type=int, default=0, help="rounds made again at most, for disturbed ones")
    args = parser.parse_args()
    print(json.dumps(measure(args.seconds, args.repetitions, extra=args.extra), indent=2))


if __name__ == "__main__":
    main()
