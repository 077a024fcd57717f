"""An adapter that breaks the contract gets a clear error naming the missing or wrong piece.

Broken adapters are a real module (tests/fixtures/queues/broken_adapters.py) loaded by
``takeover scenarios`` in a subprocess, exactly as a user's adapter would be.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.queues import child_env


def scenarios(tmp_path: Path, attr: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "takeover", "scenarios", "--queue", f"broken_adapters:{attr}"],
        capture_output=True, text=True, timeout=120, env=child_env(), cwd=tmp_path,
    )


@pytest.mark.parametrize(
    ("attr", "message"),
    [
        ("NoFinish", "has no method finish() (required by the queue contract)"),
        ("FinishWithoutGeneration", "finish() takes 3 positional argument(s), the contract passes 4"),
        ("not_a_queue", "failed to open"),
        ("Missing", "has no attribute 'Missing'"),
    ],
)
def test_static_breach_is_one_line_and_exit_2(tmp_path: Path, attr: str, message: str) -> None:
    proc = scenarios(tmp_path, attr)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("attr", "message"),
    [
        ("ClaimReturnsDict", "claim() returned {'task': 'task', 'generation': 1}; the contract wants None or"),
        ("LibraryStateNames", "state 'FAILED' is not one of pending, running, done, uncertain"),
        ("FinishReturnsNone", "finish() returned None; the contract wants True (accepted) or False"),
    ],
)
def test_run_time_breach_names_the_method_and_value(tmp_path: Path, attr: str, message: str) -> None:
    proc = scenarios(tmp_path, attr)
    assert proc.returncode == 1
    assert message in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr
