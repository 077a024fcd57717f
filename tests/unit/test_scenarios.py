"""`takeover scenarios` in this process: the reference queue passes S1-S5, broken queues fail at the
right step, bad input is one line.

Why broken queues: a scenario check that never fails proves nothing. Each queue in
tests/fixtures/queues/spec_departures.py has exactly one departure from the spec, and the test names
the step the spec says must catch it. Queues that hang run only in a real ``takeover`` process
(tests/system/test_scenarios.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from takeover._internal.scenario.replay import load_spec, run_scenarios
from takeover.cli import main
from takeover.errors import UsageError

# The spec's tables as data, as delivered with the brief (docs/spec.md says where each file came from).
SPEC_DATA = Path(__file__).resolve().parents[2] / "docs" / "spec.json"
QUEUES = "spec_departures"  # tests/fixtures/queues/spec_departures.py, importable by name (tests/conftest.py)

pytestmark = pytest.mark.usefixtures("scenario_scratch")


def run_cli(argv, capsys):
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


# ---------------------------------------------------------------------------- the reference queue


def test_reference_queue_passes_every_step(capsys):
    rc, out, err = run_cli(["scenarios", "--json"], capsys)
    assert rc == 0, out
    assert err == ""
    doc = json.loads(out)
    spec = load_spec()
    assert [s["id"] for s in doc["scenarios"]] == ["S1", "S2", "S3", "S4", "S5"]
    assert doc["ok"] is True
    for got, want in zip(doc["scenarios"], spec["scenarios"], strict=True):
        assert got["ok"] is True
        assert got.get("final_ledger_actions") == want.get("final_ledger_actions")
        assert len(got["steps"]) == len(want["steps"])
        for g, w in zip(got["steps"], want["steps"], strict=True):
            assert g["ok"] is True and "expected" not in g
            # Shaped like the spec's scenarios.json: the same keys and values, plus ok/lease_until.
            core = {k: v for k, v in w.items() if k not in ("label", "why")}
            assert {k: g[k] for k in core} == core
            assert type(g["returns"]) is type(w["returns"])  # True is not 1


def test_bundled_data_matches_the_spec_seed():
    """The package carries its own richer copy (labels, reasons, both languages): every value of the
    spec's tables must still be in it."""
    seed = json.loads(SPEC_DATA.read_text(encoding="utf-8"))
    ours = load_spec()
    assert ours["lease_seconds"] == seed["lease_seconds"]
    for mine, theirs in zip(ours["scenarios"], seed["scenarios"], strict=True):
        assert mine["id"] == theirs["id"] and mine.get("final_ledger_actions") == theirs.get("final_ledger_actions")
        for m, t in zip(mine["steps"], theirs["steps"], strict=True):
            assert {k: m[k] for k in t} == t
            assert m["why"]["en"] and m["why"]["zh"] and m["label"]["en"] and m["label"]["zh"]


def test_transcript_en(capsys):
    rc, out, err = run_cli(["scenarios"], capsys)
    assert rc == 0 and err == ""
    assert "The task stopped — who takes over next?" in out
    for sid in ("S1", "S2", "S3", "S4", "S5"):
        assert f"{sid} — " in out
    assert "boundary: lease_until <= now holds at 31" in out
    assert "FAIL" not in out
    assert "All 5 scenario(s) match the spec (34 steps)" in out


def test_transcript_zh_is_in_the_original_language(capsys):
    rc, out, err = run_cli(["scenarios", "--lang", "zh"], capsys)
    assert rc == 0 and err == ""
    assert "任务停了，下一步由谁接手？" in out
    assert "边界 t=31 满足 lease_until <= now" in out
    for heading in ("角色", "步骤", "返回", "说明", "检查"):
        assert heading in out
    for english in ("actor", "returns", "why", "check", "All 5"):
        assert english not in out
    assert "5 个场景全部符合规范" in out


def test_narrow_terminal_gets_two_lines_per_step(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    rc, out, _ = run_cli(["scenarios", "--scenario", "S2"], capsys)
    assert rc == 0
    assert "5. t=31 B claim → 2 · running / 2" in out
    assert max(len(line) for line in out.splitlines()) <= 80


def test_scenario_filter_is_repeatable_and_case_insensitive(capsys):
    rc, out, _ = run_cli(["scenarios", "--json", "--scenario", "s4", "--scenario", "S2"], capsys)
    assert rc == 0
    assert [s["id"] for s in json.loads(out)["scenarios"]] == ["S2", "S4"]


# ----------------------------------------------------------------------------- broken queues fail


@pytest.mark.parametrize(
    ("queue", "scenario", "step", "field"),
    [
        ("StaleFinishQueue", "S3", 6, "returns"),
        ("ReclaimsDoneQueue", "S1", 4, "returns"),
        ("StrictBoundaryQueue", "S2", 5, "returns"),
        ("ForgetfulQueue", "S2", 3, "state"),
        ("ClaimsUncertainQueue", "S4", 6, "returns"),
    ],
)
def test_broken_queue_fails_at_the_step_the_spec_names(capsys, queue, scenario, step, field):
    spec = f"{QUEUES}:{queue}"
    rc, out, err = run_cli(["scenarios", "--json", "--queue", spec], capsys)
    assert rc == 1, out
    assert err == ""
    doc = json.loads(out)
    assert doc["ok"] is False
    by_id = {s["id"]: s for s in doc["scenarios"]}
    bad = by_id[scenario]["steps"][step - 1]
    assert bad["ok"] is False
    assert field in bad["mismatch"]
    assert bad["expected"][field] != bad.get(field) or field == "state"
    # every step before it matched: the transcript points at the first departure
    assert all(s["ok"] for s in by_id[scenario]["steps"][: step - 1])

    rc, out, err = run_cli(["scenarios", "--queue", spec, "--scenario", scenario], capsys)
    assert rc == 1 and err == ""
    assert f"✗ {scenario} step {step} " in out
    assert "FAIL" in out and "expected" in out
    assert f"differ from the spec ({scenario}) on {spec}" in out


def test_stale_finish_is_the_only_departure_of_the_unfenced_queue(capsys):
    rc, out, _ = run_cli(["scenarios", "--json", "--queue", f"{QUEUES}:StaleFinishQueue"], capsys)
    assert rc == 1
    failing = {s["id"] for s in json.loads(out)["scenarios"] if not s["ok"]}
    assert failing == {"S3"}  # S1, S2, S4, S5 never present a stale generation


def test_a_queue_that_raises_is_a_mismatch_not_a_crash(capsys):
    spec = f"{QUEUES}:RaisingQueue"
    rc, out, err = run_cli(["scenarios", "--queue", spec, "--scenario", "S2"], capsys)
    assert rc == 1
    assert err == ""
    assert "Traceback" not in out
    assert "✗ S2 step 4 (t=30 B claim): error: RuntimeError: disk I/O error while claiming" in out
    rc, out, _ = run_cli(["scenarios", "--json", "--queue", spec, "--scenario", "S2"], capsys)
    step4 = json.loads(out)["scenarios"][0]["steps"][3]
    assert step4["ok"] is False and step4["error"] == "RuntimeError: disk I/O error while claiming"
    assert step4["state"] == "running" and step4["generation"] == 1  # observed after the failure


def test_wrong_return_type_is_named(capsys):
    rc, out, _ = run_cli(["scenarios", "--json", "--queue", f"{QUEUES}:IntFinishQueue", "--scenario", "S1"], capsys)
    assert rc == 1
    step3 = json.loads(out)["scenarios"][0]["steps"][2]
    assert not step3["ok"] and "finish() returned 1" in step3["error"]


# -------------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--queue", "no_such_module_for_takeover:Q"], "not found"),
        (["--queue", "no-colon-here"], "MODULE:ATTR"),
        (["--queue", f"{QUEUES}:NoSuchAttr"], "has no attribute 'NoSuchAttr'"),
        (["--queue", f"{QUEUES}:NOT_CALLABLE"], "not callable"),
        (["--queue", f"{QUEUES}:NoCloseQueue"], "no method close()"),
        (["--queue", f"{QUEUES}:ExplodingConstructorQueue"], "cannot reach the queue server"),
        (["--lang", "fr"], "invalid choice: 'fr'"),
        (["--scenario", "S9"], "unknown scenario 'S9'"),
        (["--no-such-option"], "unrecognized arguments"),
        (["--step-timeout", "0"], "--step-timeout: must be a positive number of seconds, got '0'"),
        (["--step-timeout", "-2"], "--step-timeout: must be a positive number of seconds, got '-2'"),
        (["--step-timeout", "soon"], "--step-timeout: must be a positive number of seconds, got 'soon'"),
        (["--step-timeout", "nan"], "--step-timeout: must be a positive number of seconds, got 'nan'"),
        (["--step-timeout", "inf"], "--step-timeout: must be a positive number of seconds, got 'inf'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, argv, needle):
    rc, out, err = run_cli(["scenarios", *argv], capsys)
    assert rc == 2
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("takeover: error: ") and needle in lines[0]
    assert "Traceback" not in err


def test_module_that_fails_to_import_is_bad_input(capsys):
    rc, out, err = run_cli(["scenarios", "--queue", "fails_to_import:Queue"], capsys)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1
    assert "failed to import: ImportError: needs libfoo" in err


def test_library_entry_refuses_a_step_timeout_that_is_not_positive():
    with pytest.raises(UsageError, match="--step-timeout must be a positive number of seconds, got 0"):
        run_scenarios("takeover.queues.sqlite_lease:SQLiteLeaseQueue", step_timeout=0)



# ------------------------------------------------------------------------------ queues that hang

# Long enough that a healthy call on a loaded 2-core box never reaches it; each hang costs this.
