"""``takeover.stress()``'s reproduce line, from real runs: the line a run prints, records in config.json and
returns, for a queue whose module is not installed.

The location part of the line (``cd DIR &&``, ``PYTHONPATH=DIR``) is what a fresh shell needs to import the
queue again (takeover._internal.locate). The API's caller finds it out, and it must be the caller's view: the
caller is where the user's test imported the queue, the run's child only inherits a path made for it. Three
ways a user's queue is found: its module in a folder the caller has on its path, its class imported from a
file in a folder on no path (pytest's importlib mode does that to a test's folder), and its module in the
current folder. tests/unit/test_api.py has the API without runs; test_user_project.py the installed package.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from takeover import api
from tests.helpers.processes import reap_stragglers, wait_no_stragglers

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

QUEUE = """\
from takeover.queues.sqlite_lease import SQLiteLeaseQueue


class Q(SQLiteLeaseQueue):
    \"\"\"A user's queue: the reference queue under the user's own name.\"\"\"
"""
# A short run without faults: the line is what is under test, not the queue.
OPTIONS = {"profile": "smoke", "seed": 3, "workers": 2, "tasks": 6, "duration": 1.0, "no_faults": True}
GIVEN = "--workers 2 --tasks 6 --duration 1 --lease 0.6 --seed 3 "


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Write a user's queue module NAME.py into FOLDER; this process's path and modules are as before after."""
    monkeypatch.setattr(sys, "path", list(sys.path))  # whatever the run puts on it is undone
    written: list[str] = []

    def write(folder: Path, name: str) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.py").write_text(QUEUE)
        written.append(name)
        return folder

    yield write
    for name in written:
        sys.modules.pop(name, None)
    reap_stragglers(tmp_path, under=True)


def _stress(queue, out: Path) -> tuple[str, dict]:
    """Run; return the line the result carries, checked against the printed and recorded ones, and config.json."""
    result = api.stress(queue, out=str(out), **OPTIONS)
    assert result.exit_code == 0, result.output
    config = json.loads((out / "config.json").read_text())
    assert config["command"] == result.command
    assert result.output.count(f"reproduce with: {result.command}\n") == 2, result.output
    assert not wait_no_stragglers(out, timeout=10)
    return result.command, config


def _line(prefix: str, queue: str) -> str:
    """The whole line: the location, then every value of the run explicit (the profile's, the options')."""
    return (f"{prefix}takeover stress --profile smoke --queue {queue} {GIVEN}--remedy none --heartbeat 0 "
            "--arrival-rate 0 --task-time-dist lognormal --task-time-mean 0.06 --task-time-spread 0.6 "
            "--task-time-max 0.4 --local-step 0.04 --poll 0.02 --client-timeout 0.25 --drain-timeout 0 "
            "--kill-rate 0 --kill-before-action-rate 0 --kill-after-action-rate 0 --kill-during-finish-rate 0 "
            "--pause-rate 0 --expire-and-return-rate 0 --stale-return-rate 0 --claim-stampede-rate 0 "
            "--duplicate-register-rate 0 --freeze-in-call-rate 0 --stale-heartbeat-rate 0 --lease-edge-rate 0 "
            "--aim-unreached-rate 0 --lose-reply-rate 0 --slow-rate 0 --probe-rate 2")  # fmt: skip


def test_a_queue_named_from_a_folder_on_the_callers_path_puts_that_folder_on_the_line(user_module, tmp_path):
    folder = user_module(tmp_path / "elsewhere", "api_line_on_path")
    sys.path.insert(0, str(folder))  # as a conftest or a test puts a folder there

    command, config = _stress("api_line_on_path:Q", tmp_path / "run")
    assert command == _line(f"PYTHONPATH={shlex.quote(str(folder))} ", "api_line_on_path:Q")
    assert config["pythonpath"] == [str(folder)] and "workdir" not in config


def test_a_queue_class_imported_from_a_file_on_no_path_puts_its_folder_on_the_line(user_module, tmp_path):
    """Only the caller knows where the class came from: the folder is on no path, the module is loaded by file.
    The line runs again from a fresh shell in another folder, with nothing of this process's path."""
    folder = user_module(tmp_path / "by file", "api_line_by_file")  # a space: the line quotes it
    spec = importlib.util.spec_from_file_location("api_line_by_file", folder / "api_line_by_file.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["api_line_by_file"] = module
    spec.loader.exec_module(module)

    command, config = _stress(module.Q, tmp_path / "run")
    assert command == _line(f"PYTHONPATH={shlex.quote(str(folder))} ", "api_line_by_file:Q")
    assert config["pythonpath"] == [str(folder)] and "workdir" not in config

    other = tmp_path / "other"
    other.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    again = subprocess.run(["bash", "-c", command], cwd=other, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert f"reproduce with: {command}\n" in again.stdout
    assert not wait_no_stragglers(other, timeout=10, under=True)


def test_a_queue_in_the_current_folder_puts_that_folder_on_the_line(user_module, tmp_path, monkeypatch):
    folder = user_module(tmp_path / "project", "api_line_in_cwd")
    monkeypatch.chdir(folder)

    command, config = _stress("api_line_in_cwd:Q", tmp_path / "run")
    assert command == _line(f"cd {shlex.quote(str(folder))} && ", "api_line_in_cwd:Q")
    assert config["workdir"] == str(folder) and "pythonpath" not in config
