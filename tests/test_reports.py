"""The reports read by people and CI: verdict first, self-contained HTML, JUnit per invariant."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET

from harness.checker import check_run_dir

from .quality.cases import CASES


def test_reports_for_a_violated_run(tmp_path) -> None:
    folder = CASES["stale_commit_accepted"][0]().write(tmp_path / "r")
    assert check_run_dir(folder, out=io.StringIO()) == 1
    md = (folder / "report.md").read_text()
    assert md.splitlines()[0] == "# takeover check: INVALID"
    assert "| `no_stale_commit` | ❌ VIOLATED | 1 |" in md
    assert "takeover stress --profile hand --seed 1" in md  # the reproducing command
    html = (folder / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 3  # timeline, generations, throughput
    assert "<script" not in html and "http://" not in html and "https://" not in html
    suite = ET.parse(folder / "junit.xml").getroot()
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert len(cases) == 8
    failure = cases["no_stale_commit"].find("failure")
    assert failure is not None and '"claimed_gen": 2' in failure.text
    assert cases["lease_exclusive"].find("failure") is None


def test_reports_for_a_valid_run_have_no_generation_figure(tmp_path) -> None:
    folder = CASES["clean_run"][0]().write(tmp_path / "ok")
    assert check_run_dir(folder, out=io.StringIO()) == 0
    html = (folder / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 2
    assert ET.parse(folder / "junit.xml").getroot().get("failures") == "0"
