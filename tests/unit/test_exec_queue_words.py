"""What a user of ``--queue "exec:COMMAND"`` reads: every --help that takes a queue names the form, the
line FIXED suggests is one a shell runs as printed (quoted, with the database), and the scenarios'
header names the database the scenarios actually ran on.

Why: a user who read only the docs wrote a Node adapter and found --help saying only MODULE:ATTR, a
suggested stress line that a shell splits into two words and runs on SQLite, and a header saying "a
fresh SQLite file" on --db postgres.
"""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

import pytest

from takeover._internal.commands.replay import stress_line
from takeover._internal.replay.core import ReplayReport
from takeover.cli import build_parser
from takeover.reports.transcript import WORDS, header_line

# Commands whose --queue takes only a Python class: mutate rewrites its source, init-ci imports it in CI.
PYTHON_ONLY = {"mutate", "init-ci"}
EXEC_QUEUE = "exec:node /x/queue.js"


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_queue_option_that_takes_exec_says_so() -> None:
    takers = {}
    for name, sub in _subparsers().items():
        queue = next((a for a in sub._actions if "--queue" in a.option_strings), None)
        if queue is not None and name not in PYTHON_ONLY:
            takers[name] = queue.help or ""
    assert {"stress", "scenarios", "explore", "replay", "hunt", "sweep", "soak", "tune"} <= set(takers)
    assert [name for name, text in takers.items() if '"exec:COMMAND"' not in text] == []


@pytest.mark.parametrize(("database", "db_words"), [("sqlite", []), ("postgres", ["--db", "postgres"]),
                                                    ("postgresql://u:secret@h/d", ["--db", "postgresql://u@h/d"])])
def test_the_stress_line_after_fixed_is_quoted_and_names_the_database(
        tmp_path: Path, database: str, db_words: list[str]) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"seed": 7, "queue": "q:Q"}))
    report = ReplayReport(run_dir=tmp_path, queue=EXEC_QUEUE, recorded_queue="q:Q", tasks=[], replays=0, t0=0.0)
    line = stress_line(report, database)
    assert shlex.split(line) == ["takeover", "stress", "--queue", EXEC_QUEUE, "--seed", "7", *db_words]


@pytest.mark.parametrize("lang", sorted(WORDS))
def test_the_scenarios_header_names_the_database_used(lang: str) -> None:
    words = WORDS[lang]
    sqlite = header_line(words, "q:Q", "30", 10.0, "sqlite")
    postgres = header_line(words, "q:Q", "30", 10.0, "postgres")
    assert "SQLite" in sqlite and "PostgreSQL" not in sqlite
    assert "PostgreSQL" in postgres and "SQLite" not in postgres
