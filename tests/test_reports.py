"""The reports read by people and CI: verdict first, self-contained HTML, JUnit per invariant."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET

from takeover.pipeline import check_and_report

from .quality.cases import CASES


def test_reports_for_a_violated_run(tmp_path) -> None:
    folder = CASES["stale_commit_accepted"][0]().write(tmp_path / "r")
    assert check_and_report(folder, out=io.StringIO()).exit_code == 1
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
    assert check_and_report(folder, out=io.StringIO()).exit_code == 0
    html = (folder / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 2
    assert ET.parse(folder / "junit.xml").getroot().get("failures") == "0"


def _phase_label_boxes(folder):
    """The throughput figure of a checked run folder: its run-phase labels' and legend's boxes."""
    from takeover.checker import analyse
    from takeover.reports import figures

    fx = analyse(folder).facts
    fig = figures.throughput_figure(fx)
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
