"""What ``takeover replay`` leaves behind: a scenario file, a pytest file, and its report.

Why a scenario file in the spec's own format: it is the regression test a user keeps. Its expected
values (``returns``, ``state``, ``generation``, ``lease_until``) come from the spec's model
(:func:`takeover._internal.replay.model.expected_steps`), never from the queue that broke, so the scenario
fails on that queue until it is fixed and passes on any correct one, and ``takeover scenarios
--file`` shows it step by step like the spec's five.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from takeover._internal.replay.core import ReplayReport, TaskReplay
from takeover._internal.replay.judge import Departure
from takeover._internal.replay.model import expected_steps
from takeover._internal.replay.shrink import Shrunk

PYTEST_TEMPLATE = '''"""Regression scenarios written by {origin}.

Each is the shortest sequence of queue calls found that made {queue} break a promise, with what a
correct queue must answer at every step (from the spec, not from that queue): they fail until the
queue is fixed. Run them with pytest, against another queue with TAKEOVER_QUEUE=MODULE:ATTR, or step
by step with `takeover scenarios --file {scenario_file}`.
"""

import json
import os

import pytest

{db_import}from takeover.scenario_file import validate_scenarios
from takeover.scenario_replay import run_scenarios

QUEUE = os.environ.get("TAKEOVER_QUEUE", {queue!r})
{db_line}SCENARIOS = validate_scenarios(json.loads({text}), "replayed scenarios")


@pytest.mark.parametrize("scenario_id", [s["id"] for s in SCENARIOS["scenarios"]])
def test_replayed_scenario(scenario_id):
{call}
    assert result.ok, "\\n".join(result.failures())
'''
_CALL = "    [result] = run_scenarios(QUEUE, [scenario_id], doc=SCENARIOS)"
# A run on PostgreSQL (config.json's db) is replayed there too: each scenario on a fresh database of it.
_DB_IMPORT = "from takeover import db\n"
_DB_LINE = "DB = os.environ.get(\"TAKEOVER_DB\", {db!r})  # --db: sqlite, postgres or a postgresql:// URL\n"
_DB_CALL = "    with db.serve(DB):\n    " + _CALL


def _title(invariants: list[str], sh: Shrunk) -> str:
    first = next((d for d in sh.outcome.departures if set(d.invariants) & set(invariants)), None)
    what = first.what.split("; ")[0] if first is not None else ""
    return f"{', '.join(invariants)}: {what}" if what else ", ".join(invariants)


def scenarios_doc(report: ReplayReport) -> tuple[dict[str, Any], dict[tuple[str, str], str]]:
    """The scenario file for every shrunk sequence (one scenario per distinct sequence), and which
    scenario stands for each (task, invariant)."""
    found: dict[str, dict[str, Any]] = {}  # the sequence as JSON -> its scenario
    ids: dict[tuple[str, str], str] = {}
    for tr in report.tasks:
        for inv, sh in tr.shrunk.items():
            key = json.dumps([sh.task, sh.lease, sh.steps], sort_keys=True)
            sc = found.get(key)
            if sc is None:
                sid = inv
                n = 2
                while any(s["id"] == sid for s in found.values()):
                    sid, n = f"{inv}-{n}", n + 1
                sc = found[key] = _scenario(sid, tr, inv, sh, report)
            elif inv not in sc["_invariants"]:
                sc["_invariants"].append(inv)
                sc["title"] = _title(sc["_invariants"], sh)
            ids[(tr.task, inv)] = sc["id"]
    scenarios = [{k: v for k, v in sc.items() if not k.startswith("_")} for sc in found.values()]
    doc: dict[str, Any] = {
        "source": report.origin or f"takeover replay {report.run_dir} (queue {report.queue})",
        "title": f"Found by {report.origin}" if report.origin else f"Replayed from {report.run_dir}",
        "queue": report.queue,
    }
    leases = {sc["lease_seconds"] for sc in scenarios}
    if len(leases) == 1:  # one lease for all: said once, as the spec's file does
        doc["lease_seconds"] = leases.pop()
        for sc in scenarios:
            del sc["lease_seconds"]
    doc["scenarios"] = scenarios
    return doc, ids


def _scenario(sid: str, tr: TaskReplay, inv: str, sh: Shrunk, report: ReplayReport) -> dict[str, Any]:
    steps = expected_steps(sh.steps, sh.lease)
    where = {d.index: d for d in sh.outcome.departures}
    for n, st in enumerate(steps, start=1):
        if n in where:
            st["why"] = _why(where[n], report)
    sc: dict[str, Any] = {"id": sid, "title": _title([inv], sh), "_invariants": [inv],
                          "heading": (f"found by {report.origin}, shrunk" if report.origin
                                      else f"replayed from task {tr.task} of {report.run_dir.name}, shrunk")}
    if sh.task != "task":
        sc["task"] = sh.task
    sc["lease_seconds"] = sh.lease
    sc["steps"] = steps
    return sc


def _why(d: Departure, report: ReplayReport) -> str:
    """A step's why, true on whichever queue runs the scenario: the invariant the step checks, and
    what the replayed queue answered there, named and in the past (not "departed here", which a
    passing row on the fixed queue would contradict)."""
    return (f"checks {', '.join(d.invariants)}: replaying {report.run_dir.name}, "
            f"{report.queue.rpartition(':')[2]} answered this step wrong ({d.what})")


def pytest_text(report: ReplayReport, doc: dict[str, Any], scenario_file: Path) -> str:
    text = json.dumps(doc, indent=1, ensure_ascii=True)
    literal = f"r'''{text}'''" if "'''" not in text and not text.endswith("\\") else repr(text)
    from takeover._internal import db

    database = db.current().value
    sqlite = database == db.DEFAULT  # a SQLite run's file is as it always was
    origin = f"`{report.origin}`" if report.origin else f"`takeover replay` from the run {report.run_dir}"
    return PYTEST_TEMPLATE.format(origin=origin, queue=report.queue, scenario_file=scenario_file,
                                  text=literal, db_import="" if sqlite else _DB_IMPORT,
                                  db_line="" if sqlite else _DB_LINE.format(db=database),
                                  call=_CALL if sqlite else _DB_CALL)


def write_outputs(report: ReplayReport, out: Path) -> tuple[Path, Path, dict[tuple[str, str], str]]:
    """Write the scenario file to ``out`` and the pytest file beside it (``test_<name>.py``)."""
    doc, ids = scenarios_doc(report)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    test = out.with_name(f"test_{out.stem}.py")
    test.write_text(pytest_text(report, doc, out), encoding="utf-8")
    return out, test, ids


def report_json(report: ReplayReport, ids: dict[tuple[str, str], str], files: tuple[Path, Path] | None
                ) -> dict[str, Any]:
    tasks = []
    for tr in report.tasks:
        entry: dict[str, Any] = {
            "task": tr.task,
            "flagged": tr.flagged,
            "reproduced": tr.reproduced,
            "not_reproduced": {inv: tr.reasons.get(inv, "") for inv in tr.missed},
            "calls": len(tr.calls.calls),
            "indeterminate_calls": len(tr.calls.indeterminate),
            "placements_tried": tr.tried,
            "placement": tr.variant,
            "recorded_answers_matched": list(tr.matched),
            "departures": [{"step": d.index, "invariants": list(d.invariants), "what": d.what}
                           for d in (tr.outcome.departures if tr.outcome else ())],
            "scenarios": {inv: ids.get((tr.task, inv)) or ids.get((tr.same_as.get(inv, ""), inv))
                          for inv in tr.reproduced},
        }
        if tr.shrunk:
            entry["shrunk"] = {inv: {"steps": len(sh.steps), "actors": len({s.get("actor") for s in sh.steps
                                                                            if s.get("actor")}),
                                     "replays": sh.replays, "broke": list(tr.repeats[inv])}
                               for inv, sh in tr.shrunk.items()}
        tasks.append(entry)
    return {
        "run_dir": str(report.run_dir),
        "queue": report.queue,
        "recorded_queue": report.recorded_queue,
        "replays": report.replays,
        "hung": report.hung,
        "not_replayed": report.skipped,
        "reproduced": len(report.reproduced),
        "fixed": report.fixed,
        "saved_scenarios": None if report.saved is None else {"file": str(report.saved.file),
                                                               "passed": report.saved.passed,
                                                               "failed": report.saved.failed},
        "tasks": tasks,
        "scenario_file": str(files[0]) if files else None,
        "test_file": str(files[1]) if files else None,
    }
