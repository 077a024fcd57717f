"""`takeover replay RUN_DIR --issue`: the bug report a library's maintainer reads, on a stored run and on
a committed finding of docs/analyses.

What must hold: the report stands alone (versions, database, the calls in the library's own terms
where the adapter names them, expected and actual, the command), and the scenario file it carries
reproduces the departure when run as it says.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
from pathlib import Path

import pytest

from takeover._internal.replay.issue import issue_markdown
from tests.helpers.processes import takeover

ROOT = Path(__file__).resolve().parents[2]
STORED = ROOT / "tests" / "fixtures" / "runs" / "planted-finish-ignores-generation"
LITEQUEUE_FINDING = ROOT / "docs" / "analyses" / "litequeue" / "stale-completion.json"
LITEQUEUE = "takeover.adapters.litequeue:LiteQueueAdapter"


def embedded_file(report: str) -> dict:
    m = re.search(r"<<'EOF'\n(.*?)\nEOF\n", report, re.S)
    assert m, "the report carries no scenario file"
    return json.loads(m.group(1))


@pytest.mark.slow
def test_replay_issue_writes_a_report_whose_file_reproduces_the_departure(tmp_path):
    run = shutil.copytree(STORED, tmp_path / "run")
    proc = takeover("replay", str(run), "--issue", timeout=180)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report_file = run / "issue.md"
    assert f"Bug report: {report_file}" in proc.stdout
    report = report_file.read_text()
    # A queue without the adapter hook: the contract's words, said so, and no version invented.
    assert report.startswith("# `takeover.queues.planted:FinishIgnoresGeneration`: ")
    assert "(the adapter names no library)" in report and "unknown" not in report
    assert "**Expected** (step 4)" in report and "**Actual** (step 4)" in report
    assert "generation" not in report.split("## Reproduce")[0]  # the reader's words: hand-outs
    carried = tmp_path / "carried.json"
    carried.write_text(json.dumps(embedded_file(report)))
    again = takeover("scenarios", "--file", str(carried), "--queue", "takeover.queues.planted:FinishIgnoresGeneration",
                     timeout=120)
    assert again.returncode == 1, again.stdout + again.stderr
    assert "step 4" in again.stdout


def test_replay_issue_to_a_named_file_and_without_a_finding(tmp_path):
    """--issue FILE writes there; a run whose violations do not replay writes no report and says so."""
    run = shutil.copytree(ROOT / "tests" / "fixtures" / "runs" / "ref-valid", tmp_path / "run")
    proc = takeover("replay", str(run), "--issue", str(tmp_path / "bug.md"), timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "No bug report: nothing reproduced in one process." in proc.stdout
    assert not (tmp_path / "bug.md").exists()


def test_a_findings_report_speaks_the_librarys_api():
    if importlib.util.find_spec("litequeue") is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("litequeue is not installed; CI installs '.[test]'")
        pytest.skip("litequeue is an optional extra, not installed: pip install '.[litequeue]'")
    report = issue_markdown(LITEQUEUE, LITEQUEUE_FINDING)
    assert report.startswith("# litequeue 0.9: a worker's completion takes effect after its job was handed")
    assert "- **Database**: SQLite " in report
    for call in ("`LiteQueue.put(data)`", "`list_locked(1)`, `retry(message_id)` for each listed, then `pop()`",
                 "`done(message_id)`"):
        assert call in report
    row = next(line for line in report.splitlines() if line.startswith("| 4 |"))
    assert "accepted; DONE (done)" in row and "refused; LOCKED (running)" in row and "**differs**" in row
    assert f"takeover scenarios --file stale-completion.json --queue {LITEQUEUE}" in report
    steps = embedded_file(report)["scenarios"][0]["steps"]
    written = json.loads(LITEQUEUE_FINDING.read_text())["scenarios"][0]["steps"]
    assert steps == [{k: v for k, v in st.items() if k != "why"} for st in written]


@pytest.mark.needs_package("redis-server")
def test_a_report_on_redis_names_redis_and_its_command_serves_it():
    """A finding replayed on Redis says Redis and its version, and its command asks for --db redis."""
    from takeover._internal import db

    with db.serve("redis"):
        report = issue_markdown("takeover.queues.planted_redis:FinishIgnoresGeneration", LITEQUEUE_FINDING)
    assert re.search(r"- \*\*Database\*\*: Redis \d+\.\d+", report), report
    assert "--queue takeover.queues.planted_redis:FinishIgnoresGeneration --db redis" in report
    assert "takeover starts a private Redis server for it" in report


@pytest.mark.slow
def test_scenarios_file_issue_writes_the_report_of_a_committed_finding(tmp_path):
    """`takeover scenarios --file FILE --issue REPORT`: the report made from a scenario file alone (how the reports
    beside docs/analyses' findings are made), after the transcript; --issue without --file is bad input."""
    out = tmp_path / "bug.md"
    proc = takeover("scenarios", "--file", str(LITEQUEUE_FINDING), "--queue",
                    "takeover.queues.planted:FinishIgnoresGeneration", "--issue", str(out), timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith(f"Bug report: {out}")
    report = out.read_text()
    assert report.startswith("# `takeover.queues.planted:FinishIgnoresGeneration`: ")
    assert "**Expected** (step 4)" in report
    assert embedded_file(report)["queue"] == json.loads(LITEQUEUE_FINDING.read_text())["queue"]
    bad = takeover("scenarios", "--issue", str(tmp_path / "other.md"), timeout=60)
    assert bad.returncode == 2 and "--issue needs --file" in bad.stderr and "Traceback" not in bad.stderr
    assert not (tmp_path / "other.md").exists()


@pytest.mark.slow
@pytest.mark.needs_package("nodejs", "npm", "redis-server")
@pytest.mark.needs_node_for("beequeue.js")
def test_a_report_of_a_node_library_names_it_and_its_version_from_the_hello():
    """An exec: adapter names its library in its hello: the report says Bee-Queue and its pinned version, its
    calls, a clone and `make` in place of pip, and quotes the exec: queue in its command."""
    from takeover._internal import db

    finding = ROOT / "docs" / "analyses" / "bee-queue" / "stale-completion.json"
    queue = json.loads(finding.read_text())["queue"]
    with db.serve("redis"):
        report = issue_markdown(queue, finding)
    assert report.startswith("# bee-queue 2.0.0: ")
    assert "(https://github.com/bee-queue/bee-queue)" in report and "`queue._finishJob(null, data, job)" in report
    assert "pip install" not in report and "after `make`" in report
    assert f"--queue '{queue}' --db redis" in report
