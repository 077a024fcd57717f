"""Real OS processes racing on one SQLite file never receive the same (task, generation).

Why processes and a barrier: the failure modes are between processes — two of them reading the
same claimable row, or the first open of a new file (WAL switch and schema creation) failing with
"database is locked" in the others. So every round starts from a file that does not exist yet,
and all processes open it at the same instant. With short leases the processes also race to
re-claim expired tasks, so takeover itself is contended, not just the first claim.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import random
import time
from collections import Counter, defaultdict
from pathlib import Path

import psutil
import pytest

from takeover.queues.sqlite_lease import SQLiteLeaseQueue

PROCESSES = 6
BARRIER_TIMEOUT = 60.0
RACE_SECONDS = 5.0  # per file, an upper bound; a round usually ends in well under a second
CTX = mp.get_context("fork")


def _racer(index: int, paths: list[str], barrier, out: str, tasks: list[str], lease: float, takeover: bool,
           seed: int) -> None:
    """One process. For each new file: open it with all the others at once, register every task
    (duplicate registrations race too), then claim. Long lease: claim until nothing is left.
    Short lease: claims at wall-clock `now`, finishing some and abandoning the rest so that their
    leases run out and get taken over."""
    rng = random.Random(seed * 1009 + index)
    record: dict = {"claims": [], "finishes": []}
    try:
        for n, path in enumerate(paths):
            barrier.wait(timeout=BARRIER_TIMEOUT)
            queue = SQLiteLeaseQueue(path)
            for task in tasks:
                queue.register(task, 0.0)
            barrier.wait(timeout=BARRIER_TIMEOUT)
            worker = f"p{index}"
            if not takeover:
                while (got := queue.claim(worker, time.time(), lease)) is not None:
                    record["claims"].append([n, got[0], got[1]])
            else:
                # Never finish a first generation, so every task is taken over at least once;
                # stop when every task is final (or at the deadline: the checks do not need it).
                deadline = time.monotonic() + RACE_SECONDS
                while time.monotonic() < deadline:
                    got = queue.claim(worker, time.time(), lease)
                    if got is None:
                        if all(row[1] in ("done", "uncertain") for row in queue.snapshot()):
                            break
                        time.sleep(lease / 5)  # let the holders in rather than spin on the write lock
                        continue
                    record["claims"].append([n, got[0], got[1]])
                    if got[1] >= 2 and rng.random() < 0.5:
                        outcome = rng.choice(("done", "uncertain"))
                        accepted = queue.finish(got[0], got[1], outcome, time.time())
                        record["finishes"].append([n, got[0], got[1], outcome, accepted])
            queue.close()
    except BaseException as exc:  # noqa: BLE001 - reported to the parent as data
        record["error"] = f"{type(exc).__name__}: {exc}"
        barrier.abort()
    Path(out, f"{index}.json").write_text(json.dumps(record))


def _race(tmp_path: Path, rounds: int, tasks: list[str], lease: float, takeover: bool) -> tuple[list[dict], list[str]]:
    paths = [str(tmp_path / f"round{n}.sqlite") for n in range(rounds)]
    out = tmp_path / "out"
    out.mkdir()
    barrier = CTX.Barrier(PROCESSES)
    procs = [
        CTX.Process(target=_racer, args=(i, paths, barrier, str(out), tasks, lease, takeover, 7), daemon=True)
        for i in range(PROCESSES)
    ]
    try:
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout=90)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
            p.join(timeout=10)
        alive = [p.pid for p in procs if p.pid and psutil.pid_exists(p.pid) and p.exitcode is None]
        assert not alive, f"racers left behind: {alive}"
    assert [p.exitcode for p in procs] == [0] * PROCESSES
    records = [json.loads((out / f"{i}.json").read_text()) for i in range(PROCESSES)]
    errors = [r["error"] for r in records if "error" in r]
    assert not errors, errors
    return records, paths


def test_new_file_opened_by_all_at_once_and_every_task_claimed_exactly_once(tmp_path):
    tasks = [f"t{i:02d}" for i in range(40)]
    records, paths = _race(tmp_path, rounds=8, tasks=tasks, lease=3600.0, takeover=False)
    claims = [tuple(c) for r in records for c in r["claims"]]
    assert len(claims) == len(set(claims)), "a (file, task, generation) was handed out twice"
    for n, path in enumerate(paths):
        mine = Counter(task for f, task, _ in claims if f == n)
        assert mine == Counter(tasks), f"round {n}: {mine}"  # each task once, none lost
        assert {gen for f, _, gen in claims if f == n} == {1}
        queue = SQLiteLeaseQueue(path)
        try:
            snap = queue.snapshot()
        finally:
            queue.close()
        assert sorted(row[0] for row in snap) == tasks  # duplicate registrations made no extra rows
        assert {(row[1], row[2]) for row in snap} == {("running", 1)}
    # more than one process got work: the race really was a race
    assert sum(1 for r in records if r["claims"]) >= 2


@pytest.mark.parametrize("lease", [0.005, 0.05], ids=["5ms", "50ms"])
def test_takeover_of_expired_leases_races_without_duplicate_generations(tmp_path, lease):
    tasks = [f"t{i}" for i in range(5)]
    records, paths = _race(tmp_path, rounds=2, tasks=tasks, lease=lease, takeover=True)
    claims = [tuple(c) for r in records for c in r["claims"]]
    finishes = [tuple(f) for r in records for f in r["finishes"]]
    assert len(claims) == len(set(claims)), "a (file, task, generation) was handed out twice"

    generations: dict[tuple[int, str], list[int]] = defaultdict(list)
    for n, task, gen in claims:
        generations[(n, task)].append(gen)
    # first generations are never finished, so every task that was claimed was taken over
    assert all(max(g) >= 2 for g in generations.values()), generations

    for n, path in enumerate(paths):
        queue = SQLiteLeaseQueue(path)
        try:
            snap = {row[0]: row for row in queue.snapshot()}
        finally:
            queue.close()
        for task in tasks:
            gens = sorted(generations.get((n, task), []))
            # every generation was granted exactly once, in sequence, and the file agrees
            assert gens == list(range(1, len(gens) + 1)), (n, task, gens)
            state, final_gen = snap[task][1], snap[task][2]
            assert final_gen == len(gens)
            accepted = [f for f in finishes if f[0] == n and f[1] == task and f[4]]
            assert len(accepted) <= 1, accepted  # done/uncertain is final
            if accepted:
                _, _, gen, outcome, _ = accepted[0]
                assert (state, final_gen) == (outcome, gen)  # no claim after a final state
            else:
                assert state in ("pending", "running")
