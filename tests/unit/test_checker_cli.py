"""``takeover check`` as a user runs it: exit codes, bad input in one line, reports written."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from takeover.cli import main
from tests.quality.builder import Run
from tests.quality.cases import CASES


def _run(tmp_path, name: str):
    return CASES[name][0]().write(tmp_path / name)


def test_valid_run_exits_0_and_writes_everything(tmp_path, capsys) -> None:
    folder = _run(tmp_path, "paused_holder_late_finish_rejected")
    assert main(["check", str(folder)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("VALID")
    for name in ("summary.json", "report.md", "report.html", "junit.xml"):
        assert (folder / name).stat().st_size > 0
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["duplicates"]["by_cause"] == {"s5": 0, "lost_lease": 1, "other": 0}
    assert summary["counts"]["finishes"]["rejected_stale"] == 1


def test_violation_exits_1_and_fail_on_duplicates(tmp_path, capsys) -> None:
    folder = _run(tmp_path, "lease_granted_twice")
    assert main(["check", str(folder)]) == 1
    assert "lease_exclusive: VIOLATED" in capsys.readouterr().out
    dup = CASES["killed_finish_that_did_not_happen"][0]().write(tmp_path / "dup", config={"remedy": "idempotency-key"})
    assert main(["check", str(dup)]) == 0
    assert main(["check", str(dup), "--fail-on-duplicates"]) == 1  # the remedy promised none (see test_duplicate_gate)
    suite = ET.parse(dup / "junit.xml").getroot()
    assert [c.get("name") for c in suite.iter("testcase")][-1] == "no_duplicate_side_effects"
    assert suite.get("failures") == "1"


def test_json_output(tmp_path, capsys) -> None:
    folder = _run(tmp_path, "clean_run")
    assert main(["check", str(folder), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["valid"] is True
    assert set(summary["invariants"]) == {
        "no_stale_commit", "finish_within_lease", "no_reclaim_after_terminal", "generation_monotonic",
        "lease_exclusive", "single_finish", "state_matches_history", "no_lost_task"}
    assert {"tasks", "extra_actions", "by_cause"} <= set(summary["duplicates"])


def test_inconclusive_when_nothing_was_claimed(tmp_path, capsys) -> None:
    r = Run()
    r.register("a")
    r.claim(1, 1, None, status="empty")
    r.snap(("a", "pending", 0, None))
    folder = r.write(tmp_path / "idle")
    assert main(["check", str(folder)]) == 1  # a is lost: a violation outranks inconclusive
    r2 = Run()
    r2.claim(1, 1, None, status="open")
    r2.snap()
    folder2 = r2.write(tmp_path / "nothing")
    assert main(["check", str(folder2)]) == 3
    assert "INCONCLUSIVE" in capsys.readouterr().out


@pytest.mark.parametrize("damage", ["missing_dir", "file", "no_history", "bad_config", "bad_snapshot"])
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, damage: str) -> None:
    folder = _run(tmp_path, "clean_run")
    target = {"missing_dir": tmp_path / "nope", "file": folder / "config.json"}.get(damage, folder)
    if damage == "no_history":
        (folder / "history.jsonl").unlink()
    elif damage == "bad_config":
        (folder / "config.json").write_text("{not json")
    elif damage == "bad_snapshot":
        (folder / "snapshot.json").write_text('{"tasks": [["a", "done"]]}')
    assert main(["check", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("takeover: error: ") and err.count("\n") == 1 and "Traceback" not in err


def test_torn_and_corrupt_lines_are_tolerated_and_reported(tmp_path, capsys) -> None:
    r = CASES["clean_run"][0]()
    folder = r.write(tmp_path / "torn", raw_tail=b'{"time": 1, "process": 1, "ty')
    assert main(["check", str(folder)]) == 0
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["history"]["torn_tail"] is True
    assert any("torn" in w for w in summary["warnings"])
    lines = (folder / "history.jsonl").read_bytes().split(b"\n")
    lines.insert(3, b"garbage{")
    (folder / "history.jsonl").write_bytes(b"\n".join(lines))
    assert main(["check", str(folder)]) == 0
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["history"]["corrupt_lines"] == 1


def test_missing_snapshot_makes_state_invariants_unknown(tmp_path) -> None:
    folder = _run(tmp_path, "clean_run")
    (folder / "snapshot.json").unlink()
    assert main(["check", str(folder), "--no-reports"]) == 3
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["invariants"]["state_matches_history"]["valid"] == "unknown"
    assert summary["invariants"]["no_stale_commit"]["valid"] is True


def test_requested_fault_that_never_hit_warns(tmp_path) -> None:
    r = CASES["clean_run"][0]()
    folder = r.write(tmp_path / "w", config={"faults": {"kill": 0.5, "pause": 0, "lose_reply": 0.1}})
    assert main(["check", str(folder), "--no-reports"]) == 0
    warnings = json.loads((folder / "summary.json").read_text())["warnings"]
    assert any("'kill'" in w for w in warnings) and any("'lose_reply'" in w for w in warnings)
    assert not any("'pause'" in w for w in warnings)
