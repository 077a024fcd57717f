"""The ledger's answers stay exact whoever else writes the file.

Why: the service answers each action with the task's performed count and decides fencing from
the highest generation seen, out of an in-memory memo. The memo skips the file entirely when it
is *complete* (this Ledger found the file empty and nobody else wrote since). These tests write
the same file through a second connection, a second process and a reopened Ledger, and check
every answer against a COUNT over the file itself.
"""

from __future__ import annotations

import sqlite3

from takeover._internal.run.ledger import Ledger


def _performed(path: str, task: str) -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT COUNT(*) FROM actions WHERE task_id = ? AND performed = 1", (task,)).fetchone()[0]


def test_counts_on_a_fresh_file_come_from_the_memo_and_match_the_file(tmp_path) -> None:
    path = str(tmp_path / "ledger.sqlite")
    ledger = Ledger(path)
    for gen in (1, 2, 3):
        assert ledger.act("t1", gen).performed_count == gen
    assert ledger.act("t2", 1).performed_count == 1
    assert ledger._complete  # found empty, nobody else wrote: misses need no query
    ledger.close()
    assert _performed(path, "t1") == 3 and _performed(path, "t2") == 1


def test_a_second_writer_makes_the_memo_read_the_file_again(tmp_path) -> None:
    path = str(tmp_path / "ledger.sqlite")
    first, second = Ledger(path), Ledger(path)
    assert first.act("t1", 1).performed_count == 1
    assert second.act("t1", 2).performed_count == 2  # the second saw the first's row in the file
    # The first's memo says 1 for t1 and "complete": both are stale now, and it must notice.
    assert first.act("t1", 3).performed_count == 3
    assert first.act("t9", 1).performed_count == 1
    assert second.act("t9", 2).performed_count == 2  # t9 was new to the second's memo, not to the file
    first.close()
    second.close()
    assert _performed(path, "t1") == 3 and _performed(path, "t9") == 2


def test_a_reopened_ledger_continues_from_the_file(tmp_path) -> None:
    path = str(tmp_path / "ledger.sqlite")
    ledger = Ledger(path, "fencing")
    ledger.act("t1", 4)
    ledger.act("t1", 4)
    ledger.close()
    again = Ledger(path, "fencing")  # a restarted service: its memo is empty and not complete
    assert again.act("t1", 2).result == "refused"
    assert again.act("t1", 5).performed_count == 3
    assert not again._complete
    again.close()
    assert _performed(path, "t1") == 3


def test_seq_still_grows_by_one_per_row(tmp_path) -> None:
    ledger = Ledger(str(tmp_path / "ledger.sqlite"))
    seqs = [ledger.act(f"t{i}", 1).seq for i in range(5)]
    ledger.close()
    assert seqs == list(range(seqs[0], seqs[0] + 5))
