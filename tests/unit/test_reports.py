"""The reports read by people and CI: verdict first, self-contained HTML, JUnit per invariant."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET

import pytest

from takeover._internal.pipeline import check_and_report
from tests.quality.cases import CASES


def test_reports_for_a_violated_run(tmp_path) -> None:
    folder = CASES["stale_commit_accepted"][0]().write(tmp_path / "r")
    assert check_and_report(folder, out=io.StringIO()).exit_code == 1
    md = (folder / "report.md").read_text()
    assert md.splitlines()[0] == "# takeover check: INVALID"
    assert "| `no_stale_commit` | ❌ VIOLATED | 1 |" in md
    assert "takeover stress --profile hand --seed 1" in md  # the reproducing command
    html = (folder / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 4  # timeline, generations, throughput, model coverage
    assert "<h2 id='model-coverage'>Model coverage</h2>" in html
    assert "## Model coverage" in md and "| finish_done/running |" in md
    assert "<script" not in html and "http://" not in html and "https://" not in html
    suite = ET.parse(folder / "junit.xml").getroot()
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert len(cases) == 8
    failure = cases["no_stale_commit"].find("failure")
    assert failure is not None and '"claimed_gen": 2' in failure.text
    assert cases["lease_exclusive"].find("failure") is None


def test_reports_for_a_valid_run_have_no_generation_figure(tmp_path) -> None:
    folder = CASES["clean_run"][0]().write(tmp_path / "ok")
    assert check_and_report(folder, out=io.StringIO()).exit_code == 0
    html = (folder / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 3  # timeline, throughput, model coverage
    assert ET.parse(folder / "junit.xml").getroot().get("failures") == "0"


def _phase_label_boxes(folder):
    """The throughput figure of a checked run folder: its run-phase labels' and legend's boxes."""
    from takeover._internal.checker import analyse
    from takeover.reports import throughput

    fx = analyse(folder).facts
    fig = throughput.throughput_figure(fx)
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        ax = fig.axes[0]
        marks = set(fx.ops.run_events["value"].astype(str))
        labels = [t for t in ax.texts if t.get_text() in marks]
        boxes = {t.get_text(): t.get_window_extent(renderer) for t in labels}
        legend = ax.get_legend().get_window_extent(renderer)
        return boxes, legend, ax.get_window_extent(renderer)
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)


def test_throughput_phase_labels_do_not_overlap(tmp_path) -> None:
    """faults_stop and drain_end a moment apart at the right edge (a drain that had nothing left
    to do): every phase is labelled, no two labels overlap, none runs into the legend or past
    the plot's right edge."""
    build, _ = CASES["clean_run"]
    r = build()
    r.run_event(0.0, "start")
    r.run_event(4.0, "faults_stop")
    r.run_event(4.05, "drain_end")
    folder = r.write(tmp_path / "phases")
    boxes, legend, axes = _phase_label_boxes(folder)
    assert set(boxes) == {"start", "faults_stop", "drain_end"}
    names = sorted(boxes)
    for i, a in enumerate(names):
        assert not boxes[a].overlaps(legend), a
        assert boxes[a].x1 <= axes.x1 + 1 and boxes[a].x0 >= axes.x0 - 1, (a, boxes[a], axes)
        for b in names[i + 1:]:
            assert not boxes[a].overlaps(boxes[b]), (a, b)


def _stored_run(tmp_path, name: str = "planted-finish-ignores-generation"):
    """A copy of a stored real run (tests/fixtures/runs) with a stale commit, a late finish and duplicates."""
    import shutil
    from pathlib import Path

    stored = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / name
    copy = tmp_path / name
    shutil.copytree(stored, copy, ignore=shutil.ignore_patterns("expected-summary.json"))
    return copy


def _involved(result) -> list[float]:
    tasks = [t for r in result.invariants.values() if r.valid is False for t in r.tasks]
    return list(dict.fromkeys([*tasks, *result.duplicate_tasks]))


def test_the_timeline_names_the_holds_of_the_tasks_in_violations(tmp_path) -> None:
    """A violation's task can be found on the timeline: each of its holds is labelled with the task and
    generation (the stale commit of t000002: generation 1 and the takeover's generation 2), and the
    labels, placed above and below the lanes, never cover one another."""
    import matplotlib.pyplot as plt

    from takeover._internal.checker import analyse
    from takeover.reports import figures

    result = analyse(_stored_run(tmp_path))
    fig, _ = figures.timeline_figure(result.facts, _involved(result))
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        labels = [t for t in fig.axes[0].texts if t.get_text().startswith("t0")]
        names = {t.get_text() for t in labels}
        assert {"t000002 g1", "t000002 g2"} <= names
        boxes = [t.get_window_extent(renderer) for t in labels]
        for i, a in enumerate(boxes):
            for b in boxes[i + 1:]:
                assert not a.overlaps(b), (a, b)
    finally:
        plt.close(fig)
    plain, _ = figures.timeline_figure(result.facts)
    try:
        assert not [t for t in plain.axes[0].texts if t.get_text().startswith("t0")]
    finally:
        plt.close(plain)


def _five_ms_late(tmp_path):
    """A 30 s run whose one violation is a finish 5 ms past its lease: on the timeline, the part held
    past the lease is a fraction of a pixel wide."""
    from takeover._internal.checker import analyse
    from tests.quality.builder import Run

    r = Run()
    r.register("a", "late")
    r.spawn(1, "w1")
    r.spawn(2, "w2")
    r.work(2, 1, "a", 1)
    r.claim(1, 10, "late", 1)  # lease 5: until 15
    r.action(1, 14.9, "late", 1)
    r.finish(1, 15.005, "late", 1)
    r.claim(2, 30, None, status="empty")
    r.snap(("a", "done", 1, None), ("late", "done", 1, None))
    result = analyse(r.write(tmp_path / "late"))
    assert [v["invariant"] for v in result.violations] == ["finish_within_lease"]
    return result


def _rings_and_labels(fig):
    rings = [c for ax in fig.axes for c in ax.collections if c.get_gid() == "violating-operations"]
    labels = [t for ax in fig.axes for t in ax.texts if t.get_gid() == "violating-operation-label"]
    return rings, labels


def test_a_finish_5_ms_late_is_ringed_and_labelled_on_top(tmp_path) -> None:
    """Sized in points, not in seconds: the violating finish gets a ring as large at 5 ms late as at
    5 s, above every other mark, with its label; the timeline and its task's generation panel both."""
    import matplotlib.pyplot as plt

    from takeover.reports import figures

    result = _five_ms_late(tmp_path)
    fx, task = result.facts, _involved(result)
    timeline, _ = figures.timeline_figure(fx, task, result.violations)
    panels, _ = figures.generations_figure(fx, task, result.violations)
    try:
        for fig, y in ((timeline, None), (panels, 1.0)):
            fig.canvas.draw()
            rings, labels = _rings_and_labels(fig)
            assert len(rings) == 1 and len(labels) == 1, (rings, labels)
            [ring], [label] = rings, labels
            ax = ring.axes
            x0, x1 = ax.transData.transform([(15.0, 0), (15.005, 0)])[:, 0]
            assert x1 - x0 < 1  # the late part of the bar: under a pixel
            assert list(ring.get_sizes()) == [figures.VIOLATION_MARK["s"]] and ring.get_sizes()[0] >= 100
            [(t, lane)] = ring.get_offsets()
            assert t == pytest.approx(15.005, abs=1e-6) and (y is None or lane == y)
            others = [a.get_zorder() for a in [*ax.collections, *ax.patches, *ax.lines] if a is not ring]
            assert ring.get_zorder() > max(others)
            assert label.get_text() == "finish_within_lease 5 ms late" and label.get_zorder() > max(others)
            assert ax.get_window_extent().contains(*ax.transData.transform((t, lane)))
    finally:
        plt.close(timeline)
        plt.close(panels)
    plain, _ = figures.timeline_figure(fx, task)
    try:
        assert _rings_and_labels(plain) == ([], [])
    finally:
        plt.close(plain)


def test_generation_panels_tick_whole_generations(tmp_path) -> None:
    import matplotlib.pyplot as plt

    from takeover._internal.checker import analyse
    from takeover.reports import figures

    result = analyse(_stored_run(tmp_path))
    fig, _ = figures.generations_figure(result.facts, _involved(result))
    try:
        panels = [ax for ax in fig.axes if ax.get_visible()]
        assert panels
        for ax in panels:
            ticks = list(ax.get_yticks())
            assert ticks and all(float(t).is_integer() for t in ticks), (ax.get_title(), ticks)
    finally:
        plt.close(fig)


def test_reports_show_values_in_words_not_json(tmp_path) -> None:
    """Fault coverage, counts and examples hold lists and dicts; the reports print them as text."""
    import html as html_lib

    folder = _stored_run(tmp_path)
    check_and_report(folder, out=io.StringIO())
    page = html_lib.unescape((folder / "report.html").read_text())
    cells = page.split("<td>")[1:]
    assert cells and not [c for c in cells if c.startswith(("[", "{"))]
    assert "by phase: acted 2, finishing 1" in page
    assert "(1, done, 3)" in page  # t000002's accepted finish: generation 1, done, by incarnation 3
    md = (folder / "report.md").read_text()
    assert '[[1, "done", 3]]' not in md and "| (1, done, 3) |" in md


def test_plain_words_for_summary_values() -> None:
    from takeover.reports.words import plain

    assert plain(None) == "—"
    assert plain(True) == "yes"
    assert plain(0.184) == "0.184"
    assert plain([0.09, 0.182]) == "0.09, 0.182"
    assert plain([[1, "done", 3], [2, "uncertain", 5]]) == "(1, done, 3), (2, uncertain, 5)"
    assert plain({"acted": 2, "working": 1}) == "acted 2, working 1"
    assert plain({"by phase": {"acted": 2}, "by aim": {"random": 1}}) == "by phase: acted 2; by aim: random 1"


def test_plain_words_for_missing_and_numpy_values() -> None:
    import numpy as np

    from takeover.reports.words import plain

    assert plain(float("nan")) == "—" and plain([]) == "—" and plain({}) == "—"
    assert plain(np.bool_(True)) == "yes"
    assert plain(np.int64(3)) == "3"
    assert plain(np.array([1, 2])) == "1, 2"
    assert plain({"by phase": {}, "by aim": {"random": 1}}) == "by phase: —; by aim: random 1"


def test_reports_list_each_aimed_fault_with_hits_and_why_it_missed(tmp_path) -> None:
    """The fault coverage of report.md and report.html has a row per aimed fault (tried, hit, missed
    with each reason and its count); the terminal has one line of hits; a run without aimed faults
    shows none of it."""
    from tests.quality.cases import FEW_AT_THE_GATE

    folder = CASES["overlapping_aimed_faults"][0]().write(tmp_path / "aimed")
    out = io.StringIO()
    assert check_and_report(folder, out=out).exit_code == 0
    md = (folder / "report.md").read_text()
    assert "| `expire_and_return` | S2: " in md and "(finish_within_lease) | 1 | 1 | 0 |" in md
    assert "| `stale_return` | S3: " in md and "(no_stale_commit) | 1 | 1 | 0 |" in md
    assert f"| 2 | 0 | 2: {FEW_AT_THE_GATE} (2) |" in md
    assert "| 1 | 0 | 1: its end was not recorded" in md
    html = (folder / "report.html").read_text()
    assert f"<td>claim_stampede</td><td>2</td><td>0 hit, missed 2: {FEW_AT_THE_GATE} (2)" in html
    assert ("aimed faults (windows hit): expire_and_return 1/1, stale_return 1/1, claim_stampede 0/2, "
            "duplicate_register 0/1") in out.getvalue()
    clean = CASES["clean_run"][0]().write(tmp_path / "clean")
    out = io.StringIO()
    check_and_report(clean, out=out)
    assert "aimed faults" not in out.getvalue() and "stale_return" not in (clean / "report.md").read_text()


def test_the_timeline_marks_and_names_the_freezes_of_aimed_faults(tmp_path) -> None:
    """A freeze made by an aimed fault is drawn apart from a random pause and named by its fault,
    at its start, on its worker's lane."""
    import matplotlib.pyplot as plt

    from takeover._internal.checker import analyse
    from takeover.reports import figures

    fx = analyse(CASES["overlapping_aimed_faults"][0]().write(tmp_path / "aimed")).facts
    fig, _ = figures.timeline_figure(fx)
    try:
        ax = fig.axes[0]
        named = sorted((t.get_text(), round(t.xy[0], 2), t.xy[1]) for t in ax.texts if "_" in t.get_text())
        # lanes top to bottom are processes 1, 2, 3; times since the first record (t=0 in the case)
        assert named == [("S2 expire_and_return", 1.1, 1), ("S3 stale_return", 0.7, 0),
                         ("S3 stale_return", 5.3, 2)]
        assert "frozen by an aimed fault (S2, S3)" in [t.get_text() for t in ax.get_legend().get_texts()]
    finally:
        plt.close(fig)


def test_the_aimed_brief_says_duplicate_registers_windows_per_task_state() -> None:
    from takeover.reports.words import aimed_brief

    summary: dict = {"coverage": {"aimed": {
        "duplicate_register": {"total": 3, "hit": 2, "missed": 1, "reasons": {},
                               "by_state": {"done": {"total": 1, "hit": 1}, "uncertain": {"total": 2, "hit": 1}}},
        "lease_edge": {"total": 1, "hit": 1, "missed": 0, "reasons": {}}}}}
    assert aimed_brief(summary) == ("aimed faults (windows hit): duplicate_register 2/3 (done 1/1, uncertain 1/2), "
                                    "lease_edge 1/1")
