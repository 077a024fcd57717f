"""The diagnosis and every violating task in report.md and report.html (the checker's side, and
violations.csv, are tests/quality/test_diagnosis.py)."""

from __future__ import annotations

import csv
import io
import re
import shutil
from pathlib import Path

import pytest

from takeover._internal.pipeline import check_and_report
from takeover._internal.store import VIOLATIONS_CSV
from takeover.reports import tasks
from takeover.reports.words import anchor
from tests.quality.cases import CASES

STORED = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "planted-steals"  # 5 violations, 4 tasks


def _stored_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    copy.mkdir()
    for name in ("config.json", "history.jsonl", "ledger.sqlite", "snapshot.json"):
        shutil.copy2(STORED / name, copy / name)
    return copy


def _violating_tasks(folder: Path) -> list[str]:
    with (folder / VIOLATIONS_CSV).open(newline="") as f:
        return list(dict.fromkeys(r["task"] for r in csv.DictReader(f)))


def test_report_md_tells_the_diagnosis_and_where_every_violation_is(tmp_path: Path) -> None:
    folder = _stored_copy(tmp_path)
    check_and_report(folder, out=io.StringIO())
    md = (folder / "report.md").read_text()
    assert md.index("## Diagnosis") < md.index("## Invariants")
    assert "- **claim() granted task t000000 to worker #5 as generation 2 at 0.658 s while generation 1's lease ran " \
           "until 0.908 s (0.25 s early): the claim counts a lease as expired before lease_until <= now (S2)**" in md
    assert f"`takeover replay {folder} --task t000000`" in md
    assert f"Examples (every one is also in `{VIOLATIONS_CSV}`;" in md  # 5 violations, 5 examples


def test_report_html_links_every_violating_task_to_its_figure(tmp_path: Path) -> None:
    folder = _stored_copy(tmp_path)
    check_and_report(folder, out=io.StringIO())
    page = (folder / "report.html").read_text()
    violating = _violating_tasks(folder)
    assert len(violating) == 4
    sections = dict(re.findall(r"<section id='([^']+)'>(.*?)</section>", page, flags=re.S))
    assert set(sections) == {anchor(t) for t in violating}
    for task in violating:
        assert page.count(f"href='#{anchor(task)}'") >= 2  # the task table, and the example rows naming it
        assert "<svg " in sections[anchor(task)] and "lease_exclusive (lease_stolen)" in sections[anchor(task)]
    assert "<h2>Diagnosis</h2>" in page and "id='timeline'" in page
    assert "http://" not in page and "<script" not in page  # still one self-contained file


def test_junit_leads_each_failure_with_its_diagnosis(tmp_path: Path) -> None:
    import xml.etree.ElementTree as ET

    folder = _stored_copy(tmp_path)
    check_and_report(folder, out=io.StringIO())
    cases = {c.get("name"): c for c in ET.parse(folder / "junit.xml").getroot().iter("testcase")}
    failure = cases["lease_exclusive"].find("failure")
    assert failure is not None and failure.text is not None
    assert failure.text.splitlines()[0].endswith("the claim counts a lease as expired before lease_until <= now (S2) "
                                                 "[5 violation(s), pattern lease_stolen]")


def test_past_the_section_limit_the_report_points_at_violations_csv(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tasks, "MAX_SECTIONS", 2)
    folder = _stored_copy(tmp_path)
    check_and_report(folder, out=io.StringIO())
    page = (folder / "report.html").read_text()
    assert page.count("<section id=") == 2
    assert f"2 more violating task(s) without a section: see <code>{VIOLATIONS_CSV}</code>" in page


def test_a_valid_report_has_no_diagnosis_and_no_task_sections(tmp_path: Path) -> None:
    folder = CASES["clean_run"][0]().write(tmp_path / "ok")
    check_and_report(folder, out=io.StringIO())
    assert "Diagnosis" not in (folder / "report.md").read_text()
    page = (folder / "report.html").read_text()
    assert "Diagnosis" not in page and "<section" not in page


def test_every_task_id_makes_a_distinct_fragment() -> None:
    ids = ["a", "a b", "a_20_b", "ü", "x'y", "<t>", "a/b", "a.b-c_d"]
    fragments = [anchor(t) for t in ids]
    assert len(set(fragments)) == len(ids)
    assert all(re.fullmatch(r"task-[A-Za-z0-9_.-]+", f) for f in fragments)
