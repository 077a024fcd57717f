"""The history file written by several processes at once, as every run does.

Why processes: each worker, the service and the coordinator append to one history.jsonl through
their own HistoryWriter; a record torn or interleaved with another process's would be a corrupt line
for the checker. Forked writers append at full speed, and the reader must see every record whole.
"""

from __future__ import annotations

import multiprocessing as mp

from takeover._internal.history import HistoryWriter, read_history


def _append(path: str, process: int, n: int) -> None:
    w = HistoryWriter(path, process)
    for i in range(n):
        w.write("invoke", "claim", worker=f"w{process}", now=float(i), lease=1.0)


def test_concurrent_writers_never_interleave_inside_a_line(tmp_path) -> None:
    path = str(tmp_path / "h.jsonl")
    procs = [mp.get_context("fork").Process(target=_append, args=(path, p, 3000)) for p in range(1, 5)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    frame, stats = read_history(path)
    assert stats.corrupt_lines == 0 and not stats.torn_tail
    assert frame["process"].value_counts().to_dict() == {1: 3000, 2: 3000, 3: 3000, 4: 3000}
    # Each process's own records stay in the order it wrote them.
    for _, group in frame.groupby("process"):
        assert group["now"].is_monotonic_increasing
