"""The network's causes on hand-written histories: a violation and a duplicate that a partition explains are
said to be the partition's, in violations.csv's ``cause``, in ``duplicates.by_cause`` and in the ``network``
section's words; the same history without hosts names no network cause. The real runs that make these
records are tests/system/test_hosts.py's."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from takeover._internal.pipeline import check_and_report
from takeover._internal.store import VIOLATIONS_CSV
from tests.quality.builder import Run, one_task

HOSTS = {"hosts": 2, "placement": {"w1": "h1", "w2": "h2"}}


def _cut_off_holder_finishes_after_the_takeover() -> Run:
    """w1 (on h1) claims a and acts; h1 is cut off from 2 s to 8 s; its lease (5 s) runs out, w2 (on h2)
    takes a over at 5.5 s and acts; when the network comes back w1's finish of generation 1 is accepted:
    a stale commit (a queue that does not fence its finish), and a duplicate side effect."""
    r = one_task()
    r.claim(1, 0, "a", 1)
    r.action(1, 1, "a", 1)
    cut = {"host": "h1", "worker": "w1", "detail": "one", "value": "6"}
    r.rec(2, 0, "invoke", "partition", **cut)
    r.claim(2, 5.5, "a", 2)
    r.action(2, 6, "a", 2)
    r.finish(2, 6.5, "a", 2)
    r.rec(8, 0, "ok", "partition", **cut)
    r.finish(1, 8.2, "a", 1)
    r.snap(("a", "done", 2, None))
    return r


def _checked(folder: Path) -> tuple[dict, list[dict[str, str]]]:
    check_and_report(folder, out=io.StringIO(), reports=False)
    with (folder / VIOLATIONS_CSV).open(newline="") as f:
        rows = list(csv.DictReader(f))
    return json.loads((folder / "summary.json").read_text()), rows


def test_a_violation_and_a_duplicate_during_a_partition_are_the_partitions(tmp_path: Path):
    summary, rows = _checked(_cut_off_holder_finishes_after_the_takeover().write(tmp_path / "run", config=HOSTS))
    stale = [r for r in rows if r["invariant"] == "no_stale_commit"]
    assert stale and all(r["cause"] == "partition" for r in stale), rows
    assert list(rows[0])[:7] == ["invariant", "pattern", "task", "at", "generations", "processes", "cause"]
    assert summary["duplicates"]["by_cause"]["partition"] == 1
    stories = summary["network"]["stories"]
    assert ("no_stale_commit on a at 8.2 s: worker w1 (process 1) on host h1 was cut off from the database at "
            "2.0 s until 8.0 s; worker w2 (process 2) took a over at 5.5 s, and worker w1 (process 1) finished it "
            "at 8.2 s when the network came back") in stories, stories


def test_without_hosts_the_same_history_names_no_network_cause(tmp_path: Path):
    summary, rows = _checked(_cut_off_holder_finishes_after_the_takeover().write(tmp_path / "run"))
    assert rows and all(r["cause"] == "" for r in rows)
    assert "partition" not in summary["duplicates"]["by_cause"] and "network" not in summary


def test_the_timeline_draws_and_names_each_network_fault(tmp_path: Path):
    """Each network fault the run had is drawn and named in the legend (a one-way cut apart from a partition,
    the path's delay and loss as a strip of the whole run); a run without hosts names none of them."""
    import matplotlib.pyplot as plt

    from takeover._internal.checker import analyse
    from takeover.reports import figures

    r = _cut_off_holder_finishes_after_the_takeover()
    one_way = {"host": "h2", "worker": "w2", "detail": "one_way", "value": "1"}
    r.rec(9, 0, "invoke", "partition", **one_way)
    r.rec(10, 0, "ok", "partition", **one_way)
    r.rec(10.5, 0, "invoke", "conn_kill", worker="w2", target=2, host="h2")
    r.rec(10.6, 0, "ok", "conn_kill", worker="w2", target=2, host="h2", value="1")
    r.rec(11, 0, "invoke", "db_restart", value="0.5")
    r.rec(11.5, 0, "ok", "db_restart", value="0.5")
    named = {}
    for name, config in (("hosts", {**HOSTS, "net_delay": 0.02, "net_loss": 0.01}), ("plain", {})):
        fig, _ = figures.timeline_figure(analyse(r.write(tmp_path / name, config=config)).facts)
        try:
            named[name] = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
            named[f"{name} lanes"] = [t.get_text() for t in fig.axes[0].get_yticklabels()]
        finally:
            plt.close(fig)
    network = ["partition: its host cut off both ways", "one-way cut: requests arrive, replies lost",
               "database restart: down, every session lost", "connection killed by the server",
               "every host's path: +20 ms delay, 1 % loss each way (whole run)"]
    assert [t for t in named["hosts"] if t in network] == network
    assert not set(network) & set(named["plain"]) and set(named["plain"]) < set(named["hosts"])
    assert (named["hosts lanes"], named["plain lanes"]) == (["w1 #1 on h1", "w2 #2 on h2"], ["w1 #1", "w2 #2"])
