"""Stored run folders re-checked: the checker's summary.json must not change when the code around it does.

Each folder under tests/fixtures/runs/ was recorded by a real ``takeover stress --profile smoke`` run
(queue, seed and options are in its config.json) and holds only what the checker reads. Beside it,
``expected-summary.json`` is the summary the checker wrote for it when it was stored. Two fields are
set aside before comparing because they describe the checking, not the run: ``check_seconds`` (the
time the check took) and ``run_dir`` (where the copy being checked lives). Everything else must match
byte for byte: verdicts, counts, examples, notes, key order.

A change that is meant to alter a summary regenerates the expectations with
``python tests/quality/test_stored_runs.py --regenerate`` and says why in its commit.
"""

from __future__ import annotations

import io
import json
import shutil
import sys
from pathlib import Path

import pytest

from takeover._internal.pipeline import check_and_report
from takeover.cli import main

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
EXPECTED = "expected-summary.json"
RECORDED = ("config.json", "history.jsonl", "ledger.sqlite", "snapshot.json")


def _normalized_summary(folder: Path) -> str:
    """Check a copy of a stored run; its summary.json text with the two checking-only fields fixed."""
    summary = json.loads((folder / "summary.json").read_text())
    summary["run_dir"] = folder.name
    summary["check_seconds"] = 0.0
    return json.dumps(summary, indent=2) + "\n"


def _check_copy(stored: Path, into: Path) -> str:
    copy = into / stored.name
    copy.mkdir()
    for name in RECORDED:
        shutil.copy2(stored / name, copy / name)
    check_and_report(copy, out=io.StringIO(), reports=False)
    return _normalized_summary(copy)


STORED = sorted(p for p in RUNS.iterdir() if p.is_dir())


@pytest.mark.parametrize("stored", STORED, ids=[p.name for p in STORED])
def test_stored_run_summary_is_unchanged(stored: Path, tmp_path: Path) -> None:
    assert _check_copy(stored, tmp_path) == (stored / EXPECTED).read_text()


@pytest.mark.parametrize("stored", STORED, ids=[p.name for p in STORED])
def test_a_stored_run_checks_the_same_where_its_queue_cannot_be_imported(stored: Path, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The run folder is the checker's only input: ``takeover check`` on a copy whose config names a
    queue module that exists nowhere gives the same summary, verdict and exit code (these runs were
    stored before the queue's capabilities were recorded: what the history proves stands in)."""
    copy = tmp_path / stored.name
    copy.mkdir()
    for name in RECORDED:
        shutil.copy2(stored / name, copy / name)
    config = json.loads((copy / "config.json").read_text())
    config["queue"] = "not_installed_anywhere.queues:GoneQueue"
    (copy / "config.json").write_text(json.dumps(config))
    expected = json.loads((stored / EXPECTED).read_text())
    looked_up: list[str] = []

    class Recorder:  # a failed import leaves nothing in sys.modules: record every attempt instead
        @staticmethod
        def find_spec(name: str, path: object = None, target: object = None) -> None:
            looked_up.append(name)

    monkeypatch.setattr(sys, "meta_path", [Recorder(), *sys.meta_path])
    assert main(["check", str(copy), "--no-reports"]) == expected["exit_code"]
    assert not [n for n in looked_up if n.startswith("not_installed_anywhere")]
    got = json.loads(_normalized_summary(copy))
    assert got["config"].pop("queue") == "not_installed_anywhere.queues:GoneQueue"
    expected["config"].pop("queue")
    assert got == expected


def test_the_stored_runs_cover_both_verdicts() -> None:
    verdicts = {json.loads((p / EXPECTED).read_text())["valid"] for p in STORED}
    assert verdicts == {True, False}


if __name__ == "__main__" and sys.argv[1:] == ["--regenerate"]:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for stored in STORED:
            (stored / EXPECTED).write_text(_check_copy(stored, Path(tmp)))
            print(f"wrote {stored / EXPECTED}")
