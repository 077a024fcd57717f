"""How fast is the checker on a big run? Load + check a realistic 1M-event history, against only
reading the same file with the fastest reader (pyarrow's JSON reader), each in a fresh process.

Why a generated history: a real 1M-event run takes minutes; the generator replays a correct queue
(serially, so every operation's interval is exact) with the fault mix of a stress run — SIGKILLs in
every phase (open operations, takeovers, S5 duplicates), pauses past the lease (stale finishes
refused), lost replies (uncertain) — and writes the real run folder: history.jsonl, ledger.sqlite
(with the real schema), snapshot.json and config.json. The checker must find it valid.

    python -m takeover.benchmarks.check_1m [--events 1000000] [--dir DIR] [--seed 1] [--repeat 3]

Prints one JSON object: events, read (fastest reader) and check (load + invariants + counts)
seconds and peak RSS (MB), and their ratios. ``--repeat`` rounds, read and check alternating (the order
flipped each round); ``time_ratio`` is the median of the rounds' check/read ratios of the process's user
CPU time (every thread: ``read_cpu_s``, ``check_cpu_s``), with its IQR and range (``time_ratio_iqr``,
``time_ratio_range``); ``time_ratio_wall`` the same of wall-clock time (``read_s``, ``check_s``).

Why user CPU time (added later; before, the figure was the wall-clock ratio): on the shared 2-core machine
the wall time of either side moved with whatever else ran (a round's ratio from 0.9 to 3.1 within one
run), and so did the system time: five reads of the same file in a row took 0.09-1.49 s of it (page
faults, at the kernel's pace under load), while their user time stayed within 0.77-0.84 s. The read is
pyarrow's JSON reader on one thread: its threads took 1.8-3.5 s of CPU where one thread reads the same file
in 0.85-1.0 s (no slower by the clock either on 2 cores), so one thread is the fastest reader at hand.

The peak RSS (each process's own, VmHWM) is the largest of the rounds', its IQR beside it.
``read_all_files_s`` / ``time_ratio_all_files`` read every file the checker loads (history, snapshot,
ledger); ``time_ratio`` is against the history alone.
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

from takeover._internal import store
from takeover._internal.run.ledger import Ledger
from takeover.benchmarks.timing import Load, Spread
from takeover.exit_codes import ExitCode

LEASE = 5.0


def generate(folder: Path, events: int, seed: int) -> int:
    """Write a run folder whose history has about ``events`` records; returns the exact count."""
    rng = random.Random(f"check_1m:{seed}")
    folder.mkdir(parents=True, exist_ok=True)
    for name in (*store.sqlite_files(store.LEDGER_FILE), store.SUMMARY_FILE):
        # A reused --dir must not add this run's actions to the last one's ledger.
        (folder / name).unlink(missing_ok=True)
    n_tasks = max(10, int(events / 8.07))
    workers = 16
    t = 1_700_000_000.0
    lines: list[str] = []
    add = lines.append
    ledger_rows: list[tuple[object, ...]] = []
    state: dict[str, tuple[str, int]] = {}
    ids = [f"t{i:07d}" for i in range(n_tasks)]
    for task in ids:
        add(f'{{"time":{t},"process":0,"type":"invoke","f":"register","task":"{task}","now":{t}}}')
        add(f'{{"time":{t},"process":0,"type":"ok","f":"register","task":"{task}"}}')
        state[task] = ("pending", 0)
    next_process = 1
    slots: dict[str, int] = {}
    for slot in range(workers):
        slots[f"w{slot}"] = next_process
        add(f'{{"time":{t},"process":0,"type":"ok","f":"spawn","target":{next_process},"worker":"w{slot}",'
            f'"pid":{1000 + next_process}}}')
        next_process += 1
    pending = list(ids)
    pending.reverse()
    retry: list[tuple[float, str]] = []  # (lease expiry, task): claimable again after a kill or pause
    slot_names = list(slots)

    def kill_and_respawn(t: float, p: int, w: str, task: str, gen: int, aim: str, phase: str) -> int:
        """SIGKILL of incarnation ``p`` in ``phase``, its exit, and the slot's next incarnation."""
        nonlocal next_process
        add(f'{{"time":{t},"process":0,"type":"invoke","f":"kill","target":{p},"worker":"{w}",'
            f'"value":"{aim}","phase":"{phase}","task":"{task}","gen":{gen}}}')
        add(f'{{"time":{t},"process":0,"type":"ok","f":"exit","target":{p},"worker":"{w}","value":"-9"}}')
        slots[w] = new = next_process
        next_process += 1
        add(f'{{"time":{t},"process":0,"type":"ok","f":"spawn","target":{new},"worker":"{w}","pid":{1000 + new}}}')
        return new

    k = 0
    while pending or retry:
        t += 0.0004
        w = slot_names[k % workers]
        k += 1
        p = slots[w]
        if retry and retry[0][0] <= t:
            _, task = heapq.heappop(retry)
        elif pending:
            task = pending.pop()
        else:
            t = max(t, retry[0][0])
            continue
        gen = state[task][1] + 1
        state[task] = ("running", gen)
        add(f'{{"time":{t},"process":{p},"type":"invoke","f":"claim","worker":"{w}","now":{t},"lease":{LEASE}}}')
        lease_until = t + LEASE
        t += 0.0003
        add(f'{{"time":{t},"process":{p},"type":"ok","f":"claim","task":"{task}","gen":{gen},'
            f'"lease_until":{lease_until},"now":{t - 0.0003}}}')
        roll = rng.random()
        t += 0.0005
        if roll < 0.004:  # killed before acting
            heapq.heappush(retry, (lease_until, task))
            p = kill_and_respawn(t, p, w, task, gen, "before_action", "working")
            continue
        lost = roll > 0.995
        add(f'{{"time":{t},"process":{p},"type":"invoke","f":"action","task":"{task}","gen":{gen},"now":{t}}}')
        ledger_rows.append((task, gen, w, p, t + 0.0001, "lost" if lost else "ok", 1, "performed", None, "none"))
        t += 0.0004
        if lost:
            add(f'{{"time":{t},"process":{p},"type":"info","f":"action","task":"{task}","gen":{gen},"error":"timeout"}}')
        else:
            add(f'{{"time":{t},"process":{p},"type":"ok","f":"action","task":"{task}","gen":{gen},"value":"ok"}}')
        if 0.004 <= roll < 0.008:  # killed after acting, before finishing: S5
            heapq.heappush(retry, (lease_until, task))
            p = kill_and_respawn(t, p, w, task, gen, "after_action", "acted")
            continue
        outcome = "uncertain" if lost else "done"
        if 0.008 <= roll < 0.010 and not lost:  # paused past the lease: its late finish is refused
            add(f'{{"time":{t},"process":0,"type":"invoke","f":"pause","target":{p},"worker":"{w}","value":"6",'
                f'"phase":"acted","task":"{task}","gen":{gen}}}')
            # The task is taken over first (gen + 1, done), then the holder wakes and is refused.
            heapq.heappush(retry, (lease_until, task))
            add(f'{{"time":{t + 0.0001},"process":0,"type":"ok","f":"pause","target":{p},"worker":"{w}"}}')
            add(f'{{"time":{t + 0.0002},"process":{p},"type":"invoke","f":"finish","task":"{task}","gen":{gen},'
                f'"outcome":"done","now":{lease_until + 1}}}')
            add(f'{{"time":{t + 0.0003},"process":{p},"type":"fail","f":"finish","task":"{task}","gen":{gen},'
                f'"outcome":"done","error":"rejected"}}')
            continue
        if 0.010 <= roll < 0.012:  # killed during finish: it took effect (or not, half the time)
            took = rng.random() < 0.5
            add(f'{{"time":{t},"process":{p},"type":"invoke","f":"finish","task":"{task}","gen":{gen},'
                f'"outcome":"{outcome}","now":{t}}}')
            if took:
                state[task] = (outcome, gen)
            else:
                heapq.heappush(retry, (lease_until, task))
            p = kill_and_respawn(t, p, w, task, gen, "during_finish", "finishing")
            continue
        add(f'{{"time":{t},"process":{p},"type":"invoke","f":"finish","task":"{task}","gen":{gen},'
            f'"outcome":"{outcome}","now":{t}}}')
        t += 0.0003
        add(f'{{"time":{t},"process":{p},"type":"ok","f":"finish","task":"{task}","gen":{gen},'
            f'"outcome":"{outcome}","value":"true"}}')
        state[task] = (outcome, gen)
    (folder / store.HISTORY_FILE).write_text("\n".join(lines) + "\n")
    (folder / store.SNAPSHOT_FILE).write_text(json.dumps(
        {"time": t, "tasks": [[task, s, g, None] for task, (s, g) in state.items()]}))
    (folder / store.CONFIG_FILE).write_text(json.dumps(
        {"queue": "takeover.queues.sqlite_lease:SQLiteLeaseQueue", "seed": seed, "workers": workers,
         "tasks": n_tasks, "duration": 0, "lease": LEASE, "profile": "check_1m", "remedy": "none",
         "faults": {"kill": 1, "pause": 1, "lose_reply": 0.005},
         "command": f"python -m takeover.benchmarks.check_1m --events {events} --seed {seed}"}))
    Ledger(str(folder / store.LEDGER_FILE)).close()
    conn = sqlite3.connect(folder / store.LEDGER_FILE)
    conn.executemany("INSERT INTO actions (task_id, generation, worker, process, t, reply, performed, result, key,"
                     " remedy) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", ledger_rows)
    conn.commit()
    conn.close()
    return len(lines)


# The process's own peak RSS (MB): VmHWM, which starts afresh at exec. Not ``ru_maxrss``: Linux keeps that
# across exec, so a child's figure was at least the parent's RSS when it forked (here 459 MB, the generated
# history's lines), which hid any check that peaked below it.
_PEAK = """
def peak():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024
"""

# Each script prints: wall seconds, process user CPU seconds (all threads; getrusage, in microseconds, not
# os.times' 10 ms ticks), rows, peak RSS (MB).
_READ = """
import resource, sys, time
import pyarrow.json as paj
c, t = resource.getrusage(resource.RUSAGE_SELF).ru_utime, time.perf_counter()
table = paj.read_json(sys.argv[1], read_options=paj.ReadOptions(use_threads=False))
took, cpu = time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_utime - c
print(took, cpu, table.num_rows, peak())
"""

# The same files the checker loads, each with the fastest reader at hand: the yardstick
# ("only reading the same files"). ``time_ratio`` stays against the history alone, the stricter one.
_READ_ALL = """
import json, resource, sqlite3, sys, time
import pyarrow.json as paj
c, t = resource.getrusage(resource.RUSAGE_SELF).ru_utime, time.perf_counter()
table = paj.read_json(sys.argv[1], read_options=paj.ReadOptions(use_threads=False))
snap = json.loads(open(sys.argv[2]).read())
conn = sqlite3.connect("file:" + sys.argv[3] + "?mode=ro", uri=True)
rows = conn.execute("SELECT * FROM actions").fetchall()
took, cpu = time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_utime - c
print(took, cpu, table.num_rows, peak())
"""

_CHECK = """
import resource, sys, time
from takeover._internal.checker import analyse
c, t = resource.getrusage(resource.RUSAGE_SELF).ru_utime, time.perf_counter()
summary = analyse(sys.argv[1]).summary
took, cpu = time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_utime - c
assert summary["valid"] is True, {k: v for k, v in summary["invariants"].items() if v["valid"] is not True}
print(took, cpu, summary["history"]["lines"], peak())
"""


class Measured(NamedTuple):
    """One fresh process's figures: wall and CPU seconds of the measured part, its peak RSS (MB)."""

    wall: float
    cpu: float
    rss: float


def _measure(script: str, *args: str) -> Measured:
    out = subprocess.run([sys.executable, "-c", _PEAK + script, *args], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"check_1m: measurement failed: {out.stderr.strip().splitlines()[-1:]}")
    took, cpu, _, rss = out.stdout.split()
    return Measured(float(took), float(cpu), float(rss))


# Below this the kernel's split of a process's CPU time into user and system time (sampled at clock ticks) is
# too coarse: a 20k-event read (``--quick``) showed 0.0 s of user time.
_CPU_RESOLUTION_S = 0.05


def _ratio(check: Measured, read: Measured) -> float:
    """A round's check/read ratio of user CPU time; of wall-clock time for a read too short to time by CPU."""
    if min(check.cpu, read.cpu) < _CPU_RESOLUTION_S:
        return check.wall / read.wall
    return check.cpu / read.cpu


def main(argv: list[str] | None = None) -> ExitCode:
    parser = argparse.ArgumentParser(prog="python -m takeover.benchmarks.check_1m",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", help="where to write the generated run folder (default: a temp dir)")
    args = parser.parse_args(argv)
    import tempfile

    folder = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="check_1m-"))
    started = time.perf_counter()
    n = generate(folder, args.events, args.seed)
    gen_s = time.perf_counter() - started
    reads, checks, read_alls = [], [], []
    load = Load()
    for i in range(args.repeat):  # alternating, the order flipped each round: load drifts hit both alike
        hist = str(folder / store.HISTORY_FILE)
        if i % 2 == 0:
            reads.append(_measure(_READ, hist))
            checks.append(_measure(_CHECK, str(folder)))
        else:
            checks.append(_measure(_CHECK, str(folder)))
            reads.append(_measure(_READ, hist))
        read_alls.append(_measure(_READ_ALL, *(str(folder / name) for name in (
            store.HISTORY_FILE, store.SNAPSHOT_FILE, store.LEDGER_FILE))))
        load.sample()
    read_s = statistics.median(r.wall for r in reads)
    check_s = statistics.median(c.wall for c in checks)
    read_all_s = statistics.median(r.wall for r in read_alls)
    read_mb = max(r.rss for r in reads)
    check_mb = max(c.rss for c in checks)
    ratios = Spread(tuple(_ratio(c, r) for c, r in zip(checks, reads, strict=True)))
    ratios_wall = Spread(tuple(c.wall / r.wall for c, r in zip(checks, reads, strict=True)))
    ratios_all = Spread(tuple(_ratio(c, r) for c, r in zip(checks, read_alls, strict=True)))
    peaks = Spread(tuple(c.rss for c in checks))
    print(json.dumps({
        "events": n, "history_mb": round((folder / store.HISTORY_FILE).stat().st_size / 2**20, 1),
        "generate_s": round(gen_s, 2),
        "read_s": round(read_s, 3), "read_peak_rss_mb": round(read_mb), "check_s": round(check_s, 3),
        "read_cpu_s": round(statistics.median(r.cpu for r in reads), 3),
        "check_cpu_s": round(statistics.median(c.cpu for c in checks), 3),
        "check_peak_rss_mb": round(check_mb), "time_ratio": round(ratios.median, 2),
        "time_ratio_wall": round(ratios_wall.median, 2),
        "rss_ratio": round(check_mb / read_mb, 2), "repeat": args.repeat, "dir": str(folder),
        "read_all_files_s": round(read_all_s, 3), "time_ratio_all_files": round(ratios_all.median, 2),
        **ratios.keys("time_ratio", 2), **ratios_wall.keys("time_ratio_wall", 2),
        **ratios_all.keys("time_ratio_all_files", 2), **peaks.keys("check_peak_rss_mb", 0), **load.figures(),
    }))
    return ExitCode.VALID


if __name__ == "__main__":
    sys.exit(main())
