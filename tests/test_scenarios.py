"""`takeover scenarios`: the reference queue passes S1-S5, broken queues fail at the right step.

Why broken queues live here: a scenario check that never fails proves nothing. Each class below
has exactly one departure from the spec, and the test names the step the spec says must catch it.

Queues that hang (tests/hanging_queue.py) run only in a real ``takeover`` process: a hung call
leaves a thread stuck for good, and what is under test is that the process still exits, with its
verdict, and leaves nothing behind.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from takeover.cli import main
from takeover.errors import UsageError
from takeover.queues.sqlite_lease import SQLiteLeaseQueue
from takeover.scenarios import load_spec, run_scenarios

sys.path.insert(0, str(Path(__file__).parent))  # --import-mode=importlib: make the helper importable
from hanging_queue import MARKER_ENV  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SEED = REPO.parent / "shared" / "seed" / "scenarios.json"
ME = __name__  # the module name pytest imported this file under; --queue needs it


# ----------------------------------------------------------------------- queues with one bug each


class StaleFinishQueue(SQLiteLeaseQueue):
    """Completes by task id alone, like most database-backed queues: no fencing on finish."""

    def finish(self, task_id, generation, outcome, now):
        cur = self._conn.execute(
            "UPDATE tasks SET state = ?, lease_until = NULL WHERE task_id = ? AND state = 'running'",
            (outcome, task_id),
        )
        return cur.rowcount == 1


class ReclaimsDoneQueue(SQLiteLeaseQueue):
    """Treats done as claimable again once nothing else is."""

    def claim(self, worker, now, lease):
        got = super().claim(worker, now, lease)
        if got is not None:
            return got
        row = self._conn.execute("SELECT task_id, generation FROM tasks WHERE state = 'done' LIMIT 1").fetchone()
        if row is None:
            return None
        self._conn.execute(
            "UPDATE tasks SET state = 'running', generation = generation + 1, lease_until = ? WHERE task_id = ?",
            (now + lease, row[0]),
        )
        return row[0], row[1] + 1, float(now + lease)


class StrictBoundaryQueue(SQLiteLeaseQueue):
    """Off by one at the boundary: takes over only when lease_until < now."""

    def claim(self, worker, now, lease):
        row = self._conn.execute(
            "SELECT task_id FROM tasks WHERE state = 'pending' OR (state = 'running' AND lease_until < ?) LIMIT 1",
            (now,),
        ).fetchone()
        if row is None:
            return None
        gen = self._conn.execute(
            "UPDATE tasks SET state = 'running', generation = generation + 1, lease_until = ? WHERE task_id = ?"
            " RETURNING generation",
            (now + lease, row[0]),
        ).fetchone()[0]
        return row[0], gen, float(now + lease)


class ForgetfulQueue(SQLiteLeaseQueue):
    """Opens a new file on every open, as if the table lived in memory: nothing survives an exit."""

    opened = itertools.count()

    def __init__(self, db_path):
        super().__init__(f"{db_path}.{next(self.opened)}")


class ClaimsUncertainQueue(SQLiteLeaseQueue):
    """Lets uncertain tasks be re-claimed once their old lease would have expired."""

    def claim(self, worker, now, lease):
        self._conn.execute("UPDATE tasks SET state = 'running', lease_until = 0 WHERE state = 'uncertain'")
        return super().claim(worker, now, lease)


class RaisingQueue(SQLiteLeaseQueue):
    """Fails inside a step with a multi-line message."""

    def claim(self, worker, now, lease):
        if now >= 30:
            raise RuntimeError("disk I/O error\n  while claiming")
        return super().claim(worker, now, lease)


class IntFinishQueue(SQLiteLeaseQueue):
    """Returns 1/0 from finish: right truth value, wrong type for the contract."""

    def finish(self, task_id, generation, outcome, now):
        return int(super().finish(task_id, generation, outcome, now))


class NoCloseQueue:
    def __init__(self, db_path):
        pass

    def register(self, task_id, now):
        pass

    def claim(self, worker, now, lease):
        return None

    def finish(self, task_id, generation, outcome, now):
        return False

    def snapshot(self):
        return []


class ExplodingConstructorQueue:
    def __init__(self, db_path):
        raise OSError("cannot reach the queue server")


NOT_CALLABLE = 42


def run_cli(argv, capsys):
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(autouse=True)
def _private_tmp(tmp_path, monkeypatch):
    """Scenario files go to this test's tmp_path, so we can check they are removed afterwards."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.setenv("COLUMNS", "140")
    yield
    assert list(scratch.iterdir()) == [], "takeover scenarios left temporary files behind"


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
    """The project carries its own copy; when the spec folder is at hand, they must agree."""
    if not SEED.exists():
        pytest.skip(f"spec seed not present at {SEED}")
    seed = json.loads(SEED.read_text(encoding="utf-8"))
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


def test_installed_console_script_json():
    """The real entry point, in its own process, as a user or CI runs it."""
    exe = Path(sys.executable).with_name("takeover")
    if not exe.exists():
        exe = REPO / ".venv" / "bin" / "takeover"
    proc = subprocess.run(
        [str(exe), "scenarios", "--json"], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["ok"] is True and len(doc["scenarios"]) == 5
    assert sum(len(s["steps"]) for s in doc["scenarios"]) == 34


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
    spec = f"{ME}:{queue}"
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
    rc, out, _ = run_cli(["scenarios", "--json", "--queue", f"{ME}:StaleFinishQueue"], capsys)
    assert rc == 1
    failing = {s["id"] for s in json.loads(out)["scenarios"] if not s["ok"]}
    assert failing == {"S3"}  # S1, S2, S4, S5 never present a stale generation


def test_a_queue_that_raises_is_a_mismatch_not_a_crash(capsys):
    spec = f"{ME}:RaisingQueue"
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
    rc, out, _ = run_cli(["scenarios", "--json", "--queue", f"{ME}:IntFinishQueue", "--scenario", "S1"], capsys)
    assert rc == 1
    step3 = json.loads(out)["scenarios"][0]["steps"][2]
    assert not step3["ok"] and "finish() returned 1" in step3["error"]


# -------------------------------------------------------------------------------------- bad input


@pytest.fixture
def broken_import_module(tmp_path, monkeypatch):
    mod = tmp_path / "mods"
    mod.mkdir()
    (mod / "takeover_test_broken_import.py").write_text("import math\nraise ImportError('needs libfoo')\n")
    monkeypatch.syspath_prepend(str(mod))
    yield "takeover_test_broken_import:Queue"
    sys.modules.pop("takeover_test_broken_import", None)


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--queue", "no_such_module_for_takeover:Q"], "not found"),
        (["--queue", "no-colon-here"], "MODULE:ATTR"),
        (["--queue", f"{ME}:NoSuchAttr"], "has no attribute 'NoSuchAttr'"),
        (["--queue", f"{ME}:NOT_CALLABLE"], "not callable"),
        (["--queue", f"{ME}:NoCloseQueue"], "no method close()"),
        (["--queue", f"{ME}:ExplodingConstructorQueue"], "cannot reach the queue server"),
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


def test_module_that_fails_to_import_is_bad_input(capsys, broken_import_module):
    rc, out, err = run_cli(["scenarios", "--queue", broken_import_module], capsys)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1
    assert "failed to import: ImportError: needs libfoo" in err


def test_bad_input_in_a_real_process():
    env = dict(os.environ, PYTHONPATH="")
    proc = subprocess.run(
        [sys.executable, "-m", "takeover", "scenarios", "--queue", "nope_not_a_module:Q"],
        capture_output=True, text=True, timeout=120, cwd=REPO, env=env,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [
        "takeover: error: queue module 'nope_not_a_module' not found (nope_not_a_module is missing)"
    ]


def test_library_entry_refuses_a_step_timeout_that_is_not_positive():
    with pytest.raises(UsageError, match="--step-timeout must be a positive number of seconds, got 0"):
        run_scenarios("takeover.queues.sqlite_lease:SQLiteLeaseQueue", step_timeout=0)


# ------------------------------------------------------------------------------ queues that hang

# Long enough that a healthy call on a loaded 2-core box never reaches it; each hang costs this.
HANG_TIMEOUT = "1.5"


def start_scenarios(tmp_path: Path, *args: str) -> tuple[subprocess.Popen, Path]:
    """The real command in its own session (so SIGINT to its group is a terminal's Ctrl-C), its
    temporary folders in this test's scratch folder, and a marker the hanging queue writes."""
    marker = tmp_path / "hang-marker"
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), str(REPO)]),
        TMPDIR=str(tmp_path / "scratch"),
        COLUMNS="140",
        **{MARKER_ENV: str(marker)},
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "takeover", "scenarios", *args],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    return proc, marker


def left_behind(marker: Path) -> list[psutil.Process]:
    """Live processes that inherited this test's marker: the command or anything it started."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get(MARKER_ENV) == str(marker) and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def finish(proc: subprocess.Popen, marker: Path, timeout: float = 60) -> tuple[str, str]:
    """Wait for the command's own exit (a hang shows up as TimeoutExpired), then make sure nothing of
    it survives; whatever happened, kill what is left so a failing test leaves no process either."""
    try:
        out, err = proc.communicate(timeout=timeout)
        left = left_behind(marker)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for straggler in left_behind(marker):
            straggler.kill()
    assert not left, f"processes outlived takeover scenarios: {left}"
    return out, err


@pytest.mark.timeout(90)
def test_a_hung_claim_fails_its_step_and_the_other_scenarios_still_run(tmp_path):
    proc, marker = start_scenarios(tmp_path, "--queue", "hanging_queue:ClaimHangsInS2", "--step-timeout", HANG_TIMEOUT)
    out, err = finish(proc, marker)
    assert marker.exists(), "the queue never reached its hang: this run proves nothing"
    assert proc.returncode == 1, out + err
    assert err == "" and "Traceback" not in out
    assert "✗ S2 step 4 (t=30 B claim): error: claim() did not return within 1.5 s" in out
    assert "S2 stopped at step 4: claim() did not return within 1.5 s; steps 5-7 not run" in out
    # Every other scenario ran to its end on a fresh queue, and matched: the hung step is the only
    # failing row of 34, S2 the only failing scenario, and the ledgers of S4 and S5 were judged.
    for sid in ("S1", "S3", "S4", "S5"):
        assert f"{sid} — " in out
    assert out.count("FAIL") == 1
    assert out.count("\nskip ") == 3
    assert "ledger: 1 action(s) performed (expected 1)" in out
    assert "ledger: 2 action(s) performed (expected 2)" in out
    assert "1 of 34 steps differ from the spec (S2) on hanging_queue:ClaimHangsInS2." in out
    assert "1 scenario(s) stopped at a queue call that did not return within 1.5 s (S2); 3 step(s) not run." in out


@pytest.mark.timeout(90)
def test_every_kind_of_hang_is_reported_where_it_happened(tmp_path):
    """A hang in the action, in the observing snapshot (a spinning loop that holds the GIL), in the
    constructor before the first step, and in the reopen of 'worker exits' (HangsFourWays)."""
    proc, marker = start_scenarios(
        tmp_path, "--json", "--queue", "hanging_queue:HangsFourWays", "--step-timeout", HANG_TIMEOUT
    )
    out, err = finish(proc, marker)
    assert proc.returncode == 1, out + err
    assert err == ""
    doc = json.loads(out)
    assert doc["ok"] is False and doc["step_timeout"] == 1.5
    by_id = {s["id"]: s for s in doc["scenarios"]}
    assert list(by_id) == ["S1", "S2", "S3", "S4", "S5"]
    assert by_id["S1"]["ok"] is True and "hung" not in by_id["S1"]
    assert all(st["ok"] for st in by_id["S1"]["steps"])
    opening = "opening the queue (hanging_queue:HangsFourWays) did not return within 1.5 s"
    expected = {  # scenario: (call, step, error, steps that ran before it)
        "S2": ("claim", 4, "claim() did not return within 1.5 s", 3),
        "S3": ("snapshot", 3, "snapshot() did not return within 1.5 s", 2),
        "S4": ("open", None, opening, 0),
        "S5": ("open", 4, opening, 3),
    }
    for sid, (call, step, error, ran) in expected.items():
        sc = by_id[sid]
        assert sc["ok"] is False
        assert sc["hung"] == {"call": call, "step": step, "step_timeout": 1.5, "error": error}
        assert "final_ledger_actions" not in sc  # not judged: the run of the scenario was cut short
        steps = sc["steps"]
        assert all(st["ok"] and "skipped" not in st for st in steps[:ran])
        if step is not None:
            hung = steps[step - 1]
            assert hung["ok"] is False and hung["hung"] is True and hung["error"] == error
            assert hung["returns"] is None and hung["state"] is None
        after = steps[step or 0:]
        assert after and all(st["skipped"] is True and st["ok"] is False and "error" not in st for st in after)
        assert all("expected" in st for st in after)  # what the spec would have checked


@pytest.mark.timeout(90)
def test_ctrl_c_during_a_hung_step_exits_130_and_cleans_up(tmp_path):
    # A step timeout far beyond the test's patience: only Ctrl-C can end this run in time.
    proc, marker = start_scenarios(tmp_path, "--queue", "hanging_queue:ClaimHangsInS2", "--step-timeout", "600")
    try:
        deadline = time.monotonic() + 60
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), "the queue never reached its hang"
        os.killpg(proc.pid, signal.SIGINT)
    finally:
        out, err = finish(proc, marker, timeout=30)
    assert proc.returncode == 130, out + err
    assert err == "takeover: interrupted\n"
    # The scratch folder being empty (autouse fixture) shows S2's files were removed on the way out.
