"""takeover in a user's own project, as a new user meets it: installed from the checkout into a fresh
environment (not the editable install), a project folder outside the repository with the user's queue
module and a ten-line pytest file, and the workflow ``takeover init-ci`` writes, its steps' commands run
here as CI would run them.

The environment: a fresh venv whose site-packages has takeover installed from the checkout (a real,
non-editable install: the package as a wheel lays it out, the ``takeover`` script, the ``pytest11``
entry point), with this environment's third-party packages (pandas, pytest, ...) on its path, so no
network is needed. Nothing of the repository is on the user's path. A queue passed as a class from a
folder only the test process has on its path (pytest's) reaches every worker through the run's
PYTHONPATH.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from tests.helpers.processes import REPO, reap_stragglers, wait_no_stragglers

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

TEN_LINES = """\
from buggyq import BumpsByTwo


def test_scenarios(takeover):
    takeover.scenarios("myq:Q")


def test_my_queue_under_faults(takeover):
    takeover.stress("myq:Q", profile="smoke", seed=1, tasks=30)


def test_a_buggy_queue_under_faults(takeover):
    takeover.stress(BumpsByTwo, profile="smoke", seed=1, tasks=30)
"""

MY_QUEUE = """\
from takeover.queues.sqlite_lease import SQLiteLeaseQueue


class Q(SQLiteLeaseQueue):
    \"\"\"The user's queue: here, the reference queue under the user's own name.\"\"\"
"""

ONE_CELL_GRID = """\
description = "one cell: the workflow's sweep step, run for seconds"
base = "smoke"
seeds = 1
seed = 1
target = 20.0
lease = [0.6]
fault_scale = [1.0]
[fixed]
workers = 2
tasks = 20
duration = 1.0
[faults]
kill_after_action = 1.0
[[distribution]]
name = "light"
dist = "lognormal"
mean = 0.05
spread = 0.5
max = 0.5
[[mode]]
remedy = "none"
heartbeat = 0.0
"""


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with takeover installed from the checkout, and this environment's dependencies."""
    root = tmp_path_factory.mktemp("fresh") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    (site,) = (root / "lib").glob("python3*/site-packages")
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # --ignore-installed: the editable takeover of this environment is visible through that path, and
    # pip must neither uninstall it nor take it for this one. --no-build-isolation: no network.
    subprocess.run([str(root / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-deps", "--ignore-installed",
                    "--no-build-isolation", str(REPO)], check=True, timeout=240, cwd=root.parent,
                   env=_env(root))  # fmt: skip
    return root


def _env(venv: Path, **extra: str) -> dict[str, str]:
    """A fresh shell's environment: the venv first on PATH, nothing of the repository on any path."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV") and not k.startswith("PYTEST")}
    env["PATH"] = os.pathsep.join([str(venv / "bin"), "/usr/bin", "/bin"])
    env["COLUMNS"] = "140"
    return env | extra


def _run(venv: Path, argv: list[str] | str, cwd: Path, timeout: float = 180, **env: str) -> subprocess.CompletedProcess:
    shell = isinstance(argv, str)
    cmd = ["bash", "-e", "-o", "pipefail", "-c", argv] if shell else argv
    return subprocess.run(cmd, cwd=cwd, env=_env(venv, **env), capture_output=True, text=True, timeout=timeout)


def _project(tmp_path: Path) -> Path:
    proj = tmp_path / "userproj"
    proj.mkdir()
    (proj / "myq.py").write_text(MY_QUEUE)
    shutil.copy(REPO / "harness" / "queues" / "planted.py", proj / "buggyq.py")  # a copy of a planted bug
    return proj


def _reap(root: Path) -> list[int]:
    """Every process of a run under ``root`` still alive after a short wait: killed, and returned."""
    left = wait_no_stragglers(root, timeout=10, under=True)
    reap_stragglers(root, under=True)
    return [p.pid for p in left]


def test_the_installed_package_is_takeover_from_the_checkout_not_the_editable_one(venv: Path, tmp_path) -> None:
    out = _run(venv, [str(venv / "bin" / "python"), "-c", "import takeover; print(takeover.__file__)"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert Path(out.stdout.strip()).is_relative_to(venv), out.stdout
    assert (venv / "bin" / "takeover").is_file()


def test_a_ten_line_test_file_runs_the_scenarios_and_stress_and_fails_readably_on_a_bug(venv: Path, tmp_path) -> None:
    """The user's queue is in the project's root (the current folder); the buggy one beside the tests, in a
    folder only pytest puts on the path: the run gets that folder on its PYTHONPATH, and so does its
    reproduce line."""
    proj = _project(tmp_path)
    tests = proj / "tests"
    tests.mkdir()
    (proj / "buggyq.py").rename(tests / "buggyq.py")
    (tests / "test_myq.py").write_text(TEN_LINES)
    try:
        out = _run(venv, ["python", "-m", "pytest", "tests/test_myq.py", "--takeover-duration", "1.5", "-p",
                          "no:cacheprovider", "--junitxml=junit.xml", "--basetemp", str(proj / "bt")], proj)
    finally:
        assert _reap(proj) == []
    assert out.returncode == 1, out.stdout + out.stderr
    assert "1 failed, 2 passed" in out.stdout, out.stdout
    lines = out.stdout.splitlines()
    message = "\n".join(line for line in lines if line.startswith("E "))
    assert "AssertionError: takeover stress failed (exit 1):" in message
    assert "INVALID: " in message and "generation_monotonic: VIOLATED" in message
    assert f"reproduce with: PYTHONPATH={tests} takeover stress --profile smoke --queue buggyq:BumpsByTwo " in message
    (run_dir,) = [p for p in (proj / "bt").glob("test_a_buggy*/takeover/stress-1") if not p.parents[1].is_symlink()]
    assert f"run folder: {run_dir}" in message
    assert not list((proj / "bt").glob("test_my_queue*/takeover/stress-*")), "a passing test's run is removed"
    config = json.loads((run_dir / "config.json").read_text())
    assert config["pythonpath"] == [str(tests)] and "workdir" not in config
    assert (config["duration"], config["tasks"]) == (1.5, 30)
    case = next(c for c in ET.parse(proj / "junit.xml").getroot().iter("testcase")
                if c.get("name") == "test_a_buggy_queue_under_faults")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["takeover.stress.verdict"] == "INVALID" and props["takeover.stress.run_dir"] == str(run_dir)
    assert props["takeover.stress.reproduce"] == config["command"]

    # the command line finds the user's module in the current folder, as python -m would, and says where
    # it looked for one that is elsewhere
    good = _run(venv, ["takeover", "scenarios", "--queue", "myq:Q"], proj)
    assert good.returncode == 0, good.stdout + good.stderr
    assert "All 5 scenario(s) match the spec" in good.stdout
    elsewhere = _run(venv, ["takeover", "scenarios", "--queue", "buggyq:BumpsByTwo"], proj)
    assert elsewhere.returncode == 2 and elsewhere.stderr == (
        f"takeover: error: queue module 'buggyq' not found (buggyq is missing); looked in the current folder "
        f"({proj}) and on the import path; run from the folder that holds it, or add that folder to PYTHONPATH\n")

    # the reproduce line runs again from a fresh shell started in another folder
    other = tmp_path / "other"
    other.mkdir()
    try:
        again = _run(venv, config["command"], other)
    finally:
        assert _reap(other) == []
    assert again.returncode == 1, again.stdout + again.stderr  # the bug shows on every claim: it fires again
    assert "takeover stress: run folder runs/" in again.stdout and (other / "runs" / "latest").exists()


@pytest.mark.nightly
def test_init_ci_writes_a_workflow_whose_steps_run_here(venv: Path, tmp_path) -> None:
    """Every step with a command, of both jobs, run in order as the runner would (the install step aside:
    this environment is the install), with the workflow's knobs turned down to seconds."""
    proj = _project(tmp_path)
    (proj / "one-cell.toml").write_text(ONE_CELL_GRID)
    init = _run(venv, ["takeover", "init-ci", "--queue", "myq:Q"], proj)
    assert init.returncode == 0, init.stderr
    workflow = proj / ".github" / "workflows" / "takeover.yml"
    assert (proj / "tests" / "test_takeover.py").is_file() and workflow.is_file()
    # The written test's stress call, turned down as the knobs below are: 30 tasks, not smoke's 120
    # (both pytest steps run it; after a 1 s faulted phase the rest would only be drained).
    written = proj / "tests" / "test_takeover.py"
    call = 'takeover.stress(QUEUE, profile="smoke")'
    assert written.read_text().count(call) == 1, written.read_text()
    written.write_text(written.read_text().replace(call, 'takeover.stress(QUEUE, profile="smoke", tasks=30)'))
    doc = yaml.safe_load(workflow.read_text())
    env = {k: str(v) for k, v in doc["env"].items()}
    assert env["TAKEOVER_QUEUE"] == "myq:Q"
    env |= {"TAKEOVER_PR_DURATION": "1", "TAKEOVER_PR_EXPLORE_SECONDS": "1", "TAKEOVER_NIGHT_DURATION": "1",
            "TAKEOVER_NIGHT_SEEDS": "1",
            "TAKEOVER_SOAK_MINUTES": "0.05", "TAKEOVER_SWEEP_GRID": "one-cell.toml"}
    ran: dict[str, list[str]] = {}
    try:
        for job in ("pull-request", "nightly"):
            steps = [s for s in doc["jobs"][job]["steps"] if "run" in s and s.get("name") != "Install"]
            for step in steps:
                out = _run(venv, textwrap.dedent(step["run"]), proj, **env)
                assert out.returncode == 0, f"{job}: {step['name']}\n{out.stdout}\n{out.stderr}"
                ran.setdefault(job, []).append(step["name"])
    finally:
        assert _reap(proj) == []
    assert ran["pull-request"] == ["Scenarios (the spec's S1-S5, step by step)",
                                   "Explore (random call sequences in one process, each answer judged by the spec; "
                                   "a departure is shrunk)", "Short stress tests (pytest plugin)"]
    assert ran["nightly"] == ["Long stress tests on several seeds (pytest plugin)",
                              "Soak (replays the banked failing seeds first)", "Lease sweep"]
    takeover_dir = proj / ".takeover"
    assert json.loads((takeover_dir / "soak" / "soak.json").read_text())["verdict"] == "valid"
    assert (takeover_dir / "sweep" / "sweep.csv").is_file() and (takeover_dir / "junit-pytest.xml").is_file()
    assert (takeover_dir / "soak" / "junit.xml").is_file()
    configs = [*(takeover_dir / "sweep").rglob("config.json"), *(takeover_dir / "soak").rglob("config.json")]
    assert len(configs) >= 2, "a sweep cell and a soak segment"
    for path in configs:  # each run's line finds the user's queue again from a fresh shell
        assert json.loads(path.read_text())["command"].startswith(f"cd {proj} && takeover stress "), path
    # what the publish and upload steps pick up is where the commands put it
    named = {s.get("name", s.get("uses")): s for s in doc["jobs"]["nightly"]["steps"]}
    assert named["Publish JUnit"]["with"]["report_paths"] == ".takeover/**/junit*.xml"
    upload = named["Upload the soak, the sweep, failed tests' run folders and the seed bank"]
    assert upload["with"]["path"] == ".takeover" and upload["if"] == "always()"
