"""Every case of issue 34 about the queue's answers, reproduced: a malformed answer, a lease end other than
the one asked for, or a call that escapes with sys.exit() or a BaseException is a named departure (exit 1,
``answers_well_formed``) or one line and exit 2, never VALID, never a traceback, nothing left behind; and a
damaged history is INCONCLUSIVE (exit 3), never the queue's fault.

The queues are tests/fixtures/queues/bad_answers.py. The lease-end ones are the planted FinishIgnoresLease
(INVALID under ``finish_within_lease`` on its own, seeds 1-3) with a wrong lease end on top, which made it
VALID before: the test asserts the run is INVALID *and* names the lease end.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from takeover.cli import main
from tests.helpers.processes import REPO, takeover, wait_no_stragglers

pytestmark = pytest.mark.timeout(240)

SHORT = ("--profile", "smoke", "--duration", "2", "--tasks", "40")
STORED = REPO / "tests" / "fixtures" / "runs" / "ref-valid"


def _stress(tmp_path: Path, queue: str, seed: int = 1, *extra: str) -> tuple[int, dict | None, str]:
    run = tmp_path / f"run-{queue}-{seed}"
    proc = takeover("stress", *SHORT, "--queue", f"bad_answers:{queue}", "--seed", str(seed), "--out", str(run),
                    *extra, timeout=200)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr[-3000:]
    assert not wait_no_stragglers(run)
    summary = json.loads((run / "summary.json").read_text()) if (run / "summary.json").exists() else None
    return proc.returncode, summary, proc.stdout + proc.stderr


def _departure(summary: dict | None) -> str:
    assert summary is not None and summary["valid"] is False and summary["exit_code"] == 1
    check = summary["invariants"]["answers_well_formed"]
    assert check["valid"] is False and check["violations"] > 0
    return check["note"]


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, pytest.param(2, marks=pytest.mark.nightly),
                                  pytest.param(3, marks=pytest.mark.nightly)])
def test_a_nan_lease_end_does_not_hide_a_late_finish(tmp_path: Path, seed: int) -> None:
    code, summary, out = _stress(tmp_path, "NanLease", seed)
    assert code == 1
    assert "claim() returned lease_until nan, not a finite number" in _departure(summary)
    assert "answers_well_formed: VIOLATED" in out


# The gate holds a lease end other than the one asked for in tests/unit/test_answers.py (every kind, both values)
# and on a stored history below (the same note of the same check); a whole run of each is for the nightly tier.
@pytest.mark.slow
@pytest.mark.nightly
@pytest.mark.parametrize(("queue", "words"), [
    ("InfLease", "claim() returned lease_until inf, not a finite number"),
    ("ThousandLeases", "claim returned lease_until "),
])
def test_an_infinite_or_unit_mixed_lease_end_is_named_with_both_values(tmp_path: Path, queue: str,
                                                                       words: str) -> None:
    code, summary, _ = _stress(tmp_path, queue)
    note = _departure(summary)
    assert code == 1 and words in note
    if queue == "ThousandLeases":  # both values: the answered end and now + lease
        assert "expected " in note and "(now + lease; now=" in note


@pytest.mark.slow
@pytest.mark.parametrize(("queue", "words"), [
    ("HugeClaim", "(5000000 characters); the contract wants None or (task_id: str"),
    # a finish other than a bool: refused in tests/unit/test_answers.py, and a whole stress run whose finish answers
    # None is the fuzzing queue's @example in tests/system/test_fuzz_answers.py; this run of it is nightly's
    pytest.param("FinishNone", "finish() returned None; the contract wants True (accepted) or False",
                 marks=pytest.mark.nightly),
    ("ExitInClaim", "claim() raised SystemExit: 7, which a queue must never raise"),
    ("SnapshotJunk", "snapshot() row ('t-odd', 'FAILED', 1, None): state 'FAILED' is not one of"),
    pytest.param("UnprintableClaim", None, marks=pytest.mark.nightly),
])
def test_a_malformed_answer_or_an_escape_is_named_and_qualifies_the_diagnosis(tmp_path: Path, queue: str,
                                                                             words: str | None) -> None:
    code, summary, _ = _stress(tmp_path, queue)
    if words is None:  # an exception whose __str__ raises: an ordinary failing call, recorded without a crash
        assert code in (1, 3) and summary is not None and summary["valid"] is not True
        return
    note = _departure(summary)
    assert code == 1 and words in note and len(note) < 1000
    diagnosis = summary.get("diagnosis", [])
    assert diagnosis and diagnosis[0]["invariant"] == "answers_well_formed"
    assert all(e["sentence"].startswith("built on malformed answers") for e in diagnosis[1:])


@pytest.mark.parametrize("command", [("stress", *SHORT), ("scenarios",), ("explore", "--examples", "5")])
@pytest.mark.parametrize(("queue", "words"), [("ExitInInit", "SystemExit: 3"),
                                              ("BaseInInit", "BaseException: the constructor gives up")])
def test_a_constructor_that_exits_is_one_line_and_exit_2(tmp_path: Path, command: tuple[str, ...], queue: str,
                                                         words: str) -> None:
    out = tmp_path / "out"
    where = () if command[0] == "scenarios" else ("--out", str(out))
    proc = takeover(*command, "--queue", f"bad_answers:{queue}", *where, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "failed to open" in lines[0] and words in lines[0], proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.parametrize(("queue", "words"), [("ExitInClaim", "claim() raised SystemExit: 7"),
                                              ("UnprintableClaim", "Unprintable: <its message cannot be read")])
@pytest.mark.parametrize("command", [("scenarios",), ("explore", "--examples", "10")])
def test_scenarios_and_explore_report_an_escape_as_the_queue_s_failure(tmp_path: Path, command: tuple[str, ...],
                                                                      queue: str, words: str) -> None:
    where = () if command[0] == "scenarios" else ("--out", str(tmp_path / "out"))
    proc = takeover(*command, "--queue", f"bad_answers:{queue}", *where, timeout=200)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    if command[0] == "scenarios":
        assert words in proc.stdout


# -- check on stored histories -------------------------------------------------------------------------------
def _copy(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(STORED, run, ignore=shutil.ignore_patterns("expected-summary.json"))
    return run


def _rewrite_first_claim(run: Path, change) -> None:
    lines = (run / "history.jsonl").read_text().splitlines()
    for i, line in enumerate(lines):
        rec = json.loads(line)
        if rec.get("type") == "ok" and rec.get("f") == "claim":
            lines[i] = json.dumps(change(rec))
            break
    (run / "history.jsonl").write_text("\n".join(lines) + "\n")


def _check(run: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict, str]:
    code = main(["check", str(run), "--no-reports"])
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    return code, json.loads((run / "summary.json").read_text()), out.out


def test_check_says_so_of_an_old_history_with_a_null_lease_end(tmp_path: Path, capsys) -> None:
    run = _copy(tmp_path)
    _rewrite_first_claim(run, lambda rec: {k: v for k, v in rec.items() if k != "lease_until"})
    code, summary, out = _check(run, capsys)
    assert code == 1 and "claim returned no lease_until (null in the history" in _departure(summary)


def test_check_names_a_lease_end_other_than_the_one_asked_for(tmp_path: Path, capsys) -> None:
    run = _copy(tmp_path)
    lease = json.loads((run / "config.json").read_text())["lease"]
    _rewrite_first_claim(run, lambda rec: {**rec, "lease_until": rec["now"] + 1000 * lease})
    code, summary, _ = _check(run, capsys)
    assert code == 1 and "claim returned lease_until " in _departure(summary)
    note = summary["invariants"]["answers_well_formed"]["note"]
    assert "expected " in note and "(now + lease; now=" in note  # both values, as a whole run's note has them


def test_a_lease_end_shorter_than_asked_is_a_warning_with_both_values_not_a_verdict(tmp_path: Path,
                                                                                   capsys) -> None:
    """A library stamping the lease from its own clock answers a few ms short (RQ): named, not judged."""
    run = _copy(tmp_path)
    lease = json.loads((run / "config.json").read_text())["lease"]
    _rewrite_first_claim(run, lambda rec: {**rec, "lease_until": rec["now"] + lease - 0.004})
    code, summary, _ = _check(run, capsys)
    assert "answers_well_formed" not in summary["invariants"]
    assert code == json.loads((STORED / "expected-summary.json").read_text())["exit_code"]
    said = [w for w in summary["warnings"] if "shorter than asked" in w]
    assert len(said) == 1 and "by up to 4.0 ms" in said[0] and "expected " in said[0]


def test_a_well_formed_stored_run_keeps_its_summary_without_the_check(tmp_path: Path, capsys) -> None:
    code, summary, _ = _check(_copy(tmp_path), capsys)
    assert "answers_well_formed" not in summary["invariants"]
    assert code == json.loads((STORED / "expected-summary.json").read_text())["exit_code"]


@pytest.mark.parametrize(("damage", "words"), [
    (lambda text: "", "the history is empty"),
    (lambda text: text[: len(text) // 2], "the history ends before its run did"),
])
def test_a_damaged_history_is_inconclusive_in_one_line(tmp_path: Path, capsys, damage, words: str) -> None:
    run = _copy(tmp_path)
    path = run / "history.jsonl"
    path.write_text(damage(path.read_text()))
    code, summary, out = _check(run, capsys)
    assert code == 3 and summary["valid"] == "unknown" and words in summary["inconclusive"]
    assert all(inv["valid"] == "unknown" for inv in summary["invariants"].values())
    said = [line for line in out.splitlines() if "inconclusive:" in line]
    assert len(said) == 1 and words in said[0]
