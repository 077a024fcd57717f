"""Every committed finding of docs/analyses departs where its page says, on the pinned library.

Why: a page of docs/analyses states, for each finding, the scenario file that reproduces it, the step
where the library departs from the lease rules and the promise that step breaks (its findings table).
This runs each file against its adapter, as ``takeover scenarios --file FILE --queue ADAPTER`` does
(on a private PostgreSQL server for the PostgreSQL libraries, a private redis-server for the Redis
ones), and holds the page to it: the first step that differs is the page's step, and the replay's judge
names the page's invariant there. A library release or an adapter change that moves a finding fails
here, not in a reader's terminal.

A library that is not installed (an optional extra) skips its findings with the reason; under CI
(``CI=true``, where ``.[test]`` installs them all) it fails instead, as a missing PostgreSQL does.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from takeover._internal import db
from takeover._internal.replay.judge import judge
from takeover._internal.scenario.file import load_scenario_file
from takeover._internal.scenario.replay import run_scenarios
from takeover.contract import load_queue_factory
from takeover.errors import UsageError
from tests.helpers import arq_env, system_packages

ANALYSES = Path(__file__).resolve().parents[2] / "docs" / "analyses"
# A findings-table row: | name | [lib/finding.json](lib/finding.json) | step N | `invariant` | class |, where a
# finding whose own promise breaks after a first departure says so: | step N, then M | `inv`, then `other` |
ROW = re.compile(r"\|\s*\[`?(?P<file>[\w-]+/[\w.-]+\.json)`?\]\([^)]*\)\s*\|\s*step (?P<step>\d+)"
                 r"(?:, then (?P<then>\d+))?\s*\|\s*`(?P<invariant>\w+)`(?:, then `(?P<then_invariant>\w+)`)?\s*\|")
IN_CI = os.environ.get("CI", "").lower() == "true"


Row = tuple[str, str, int, str, int | None, str | None]


def page_rows() -> list[Row]:
    """(page, scenario file, step, invariant, later step, its invariant) for every row of every page's
    findings table."""
    rows: list[Row] = []
    for page in sorted(ANALYSES.glob("*.md")):
        for m in ROW.finditer(page.read_text(encoding="utf-8")):
            then = int(m["then"]) if m["then"] else None
            rows.append((page.name, m["file"], int(m["step"]), m["invariant"], then, m["then_invariant"]))
    return rows


def _unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"{reason}; CI runs every finding (CI=true)")
    pytest.skip(reason)


def _served(kind: str) -> Iterator[None]:
    try:
        with db.serve(kind):
            yield
    except UsageError as exc:  # no PostgreSQL server programs (or no redis-server) on this machine
        _unavailable(str(exc))


@pytest.fixture(scope="module")
def postgres() -> Iterator[None]:
    """One private server for the module's PostgreSQL findings (each scenario gets a fresh database)."""
    yield from _served("postgres")


@pytest.fixture(scope="module")
def redis() -> Iterator[None]:
    """One private redis-server for the module's Redis findings (each scenario gets an empty database)."""
    yield from _served("redis")


def test_every_committed_finding_is_on_a_page_and_every_row_has_its_file():
    committed = {p.relative_to(ANALYSES).as_posix() for p in ANALYSES.glob("*/*.json")}
    rows = page_rows()
    listed = {row[1] for row in rows}
    assert committed, "no finding committed under docs/analyses"
    assert committed == listed, f"not on a page: {sorted(committed - listed)}; no file: {sorted(listed - committed)}"
    for page, file, *_ in rows:  # a finding lives beside the page of its library
        assert file.split("/")[0] == page.removesuffix(".md"), f"{page} lists {file}"


# The database of each library whose adapter is a bridge (`exec:`), whose hello alone says which it takes.
EXEC_DATABASES = {"bullmq": "redis", "bee-queue": "redis", "arq": "redis", "graphile-worker": "postgres",
                  "pg-boss": "postgres"}
# The system package that serves each database (tests/helpers/system_packages.py names them).
SERVER_PACKAGE = {"redis": "redis-server", "postgres": "postgresql"}
# Findings whose replay takes long: the BullMQ, Bee-Queue and arq adapters let real time pass for the library's
# clock (0.1 s per scenario second: docs/analyses/bullmq.md, arq.md), and these files' last steps are at t=175,
# t=70 and t=151. Each library's other finding is its smoke test in the gate; these run in the nightly tier.
NIGHTLY = {"bullmq/twice-stalled-job-failed.json", "bee-queue/stalled-job-waits-for-a-worker-start.json",
           "arq/max-tries-fails-a-job-whose-workers-died.json"}


def _rows() -> list[Any]:
    return [pytest.param(*row, id=row[1], marks=[pytest.mark.nightly] if row[1] in NIGHTLY else [])
            for row in page_rows()]


@pytest.mark.parametrize("page, file, step, invariant, then, then_invariant", _rows())
def test_finding_departs_where_its_page_says(page: str, file: str, step: int, invariant: str, then: int | None,
                                             then_invariant: str | None, request: pytest.FixtureRequest) -> None:
    doc: dict[str, Any] = load_scenario_file(ANALYSES / file)
    queue = doc.get("queue")
    assert isinstance(queue, str), f"{file} names no queue"
    library = page.removesuffix(".md")
    if queue.startswith("exec:node "):  # a Node library, pinned in adapters/js/package-lock.json
        adapter = Path(queue.split()[1]).name
        server = SERVER_PACKAGE[EXEC_DATABASES[library]]
        why = system_packages.why_not("nodejs", "npm", server)
        if why:
            _unavailable(why)
        too_old, apt_has_newer = system_packages.node_too_old(adapter)
        if too_old and not apt_has_newer:  # the needs_node_for policy: nothing the set-up could have installed
            pytest.skip(too_old)
        if too_old:
            _unavailable(too_old)
    elif queue.startswith("exec:.venv-arq/"):  # arq, in its own environment (make arq): skips or fails in CI
        arq_env.require()
    elif importlib.util.find_spec(library) is None:
        _unavailable(f"{library} is an optional extra, not installed: pip install '.[{library}]'")
    if queue.startswith("exec:"):  # a bridge takes every kind until its hello says: the page's library's
        database = EXEC_DATABASES[library]
    else:
        takes = db.queue_databases(load_queue_factory(queue))
        database = takes[0] if len(takes) == 1 and takes[0] in ("postgres", "redis") else "sqlite"
    if database != "sqlite":
        request.getfixturevalue(database)  # the module's server: the serve below uses it again
    with db.serve(database):
        results = run_scenarios(queue, doc=doc)
    assert len(results) == 1, f"{file}: one finding, one scenario"
    [result] = results
    failed = [s.index for s in result.failed_steps()]
    assert failed, f"{file} no longer departs on {queue}: the page's finding is gone (a fixed release?)"
    assert failed[0] == step, f"{file} departs first at step {failed[0]}, the page says step {step}"
    outcome = judge(result, float(result.spec.get("lease_seconds", doc["lease_seconds"])))
    for index, name in ((step, invariant), (then, then_invariant)):
        if index is None:
            continue
        at = [d for d in outcome.departures if d.index == index]
        assert at and name in at[0].invariants, (
            f"{file} step {index} breaks {at[0].invariants if at else 'nothing'}, the page says {name}")


@pytest.mark.nightly
@pytest.mark.needs_package("nodejs", "npm", "redis-server")
@pytest.mark.needs_node_for("bullmq.js")
def test_bullmq_with_a_raised_max_stalled_count_runs_a_twice_stalled_job_again(redis: None) -> None:
    """The other side of bullmq.md's finding 2: the setting its documentation says to raise is the remedy
    (the page's second adapter), so the same file matches the spec in every step."""
    doc = load_scenario_file(ANALYSES / "bullmq" / "twice-stalled-job-failed.json")
    with db.serve("redis"):
        [result] = run_scenarios("exec:node adapters/js/bullmq.js --max-stalled-count 100", doc=doc)
    assert len(result.steps) == 8
    assert result.ok, f"departs at steps {[s.index for s in result.failed_steps()]}"


@pytest.mark.nightly
@pytest.mark.needs_package("nodejs", "npm", "redis-server")
@pytest.mark.needs_node_for("beequeue.js")
def test_bee_queue_checking_stalled_jobs_on_an_interval_takes_a_stalled_job_back(redis: None) -> None:
    """The other side of bee-queue.md's finding 1: calling checkStalledJobs on an interval, as Bee-Queue's
    README says to (the page's second adapter), re-enqueues the job, so the same file matches the spec."""
    doc = load_scenario_file(ANALYSES / "bee-queue" / "stalled-job-waits-for-a-worker-start.json")
    with db.serve("redis"):
        [result] = run_scenarios("exec:node adapters/js/beequeue.js --check-stalled", doc=doc)
    assert len(result.steps) == 5
    assert result.ok, f"departs at steps {[s.index for s in result.failed_steps()]}"
