"""``takeover.stress`` from a Python process, with real workers: a queue passed as a class reaches every
worker process by name, from a folder that only the caller had on its path, and the run's reproduce line
says how a fresh shell finds it.

The API's in-process parts are in tests/unit/test_api.py; interrupts and timeouts in
tests/system/test_pytest_plugin.py (through pytest-timeout, as a user's suite meets them).
"""

from __future__ import annotations

import importlib
import json
import shutil

import pytest

import takeover
from tests.helpers.processes import REPO, reap_stragglers


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_queue_class_from_a_folder_only_the_caller_has_on_its_path(tmp_path, monkeypatch) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    shutil.copy(REPO / "harness" / "queues" / "planted.py", lib / "copied_planted_queues.py")
    monkeypatch.syspath_prepend(str(lib))
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.chdir(tmp_path)
    queue = importlib.import_module("copied_planted_queues").StealsLiveLeases
    run_dir = tmp_path / "run"
    try:
        result = takeover.stress(queue, profile="smoke", duration=2, seed=1, out=run_dir)
    finally:
        reap_stragglers(run_dir)
    assert (result.exit_code, result.valid) == (1, False), result.output
    assert "lease_exclusive" in result.violations and result.run_dir == run_dir
    config = json.loads((run_dir / "config.json").read_text())
    assert config["queue"] == "copied_planted_queues:StealsLiveLeases"
    assert config["pythonpath"] == [str(lib)] and "workdir" not in config
    assert result.command.startswith(f"PYTHONPATH={lib} takeover stress --profile smoke --queue "
                                      "copied_planted_queues:StealsLiveLeases ")
    message = result.message().splitlines()
    assert message[0] == f"INVALID: {run_dir}" and message[-2:] == [f"reproduce with: {result.command}",
                                                                     f"run folder: {run_dir}"]
