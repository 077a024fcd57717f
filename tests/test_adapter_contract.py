"""An adapter that breaks the contract gets a clear error naming the missing or wrong piece.

Broken adapters are real modules written to a temporary folder and loaded by ``takeover scenarios``
in a subprocess, exactly as a user's adapter would be.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from takeover.contract import validate_claim_result, validate_finish_result, validate_snapshot
from takeover.errors import ContractError

BROKEN = '''
from takeover.queues.sqlite_lease import SQLiteLeaseQueue


class NoFinish:
    def __init__(self, db_path): pass
    def register(self, task_id, now): pass
    def claim(self, worker, now, lease): return None
    def snapshot(self): return []
    def close(self): pass


class FinishWithoutGeneration(SQLiteLeaseQueue):
    def finish(self, task_id, outcome, now): return True


class ClaimReturnsDict(SQLiteLeaseQueue):
    def claim(self, worker, now, lease):
        got = super().claim(worker, now, lease)
        return None if got is None else {"task": got[0], "generation": got[1]}


class LibraryStateNames(SQLiteLeaseQueue):
    """Forgot to map the library's own state name onto the contract's four."""
    def snapshot(self):
        return [(t, "FAILED" if s == "uncertain" else s, g, l) for t, s, g, l in super().snapshot()]


class FinishReturnsNone(SQLiteLeaseQueue):
    def finish(self, task_id, generation, outcome, now):
        super().finish(task_id, generation, outcome, now)


def not_a_queue(db_path):
    raise RuntimeError("cannot open " + db_path)
'''


def scenarios(tmp_path: Path, attr: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "broken_adapters.py").write_text(BROKEN)
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run(
        [sys.executable, "-m", "takeover", "scenarios", "--queue", f"broken_adapters:{attr}"],
        capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
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


def test_validators_accept_the_contract_shapes() -> None:
    assert validate_claim_result(None, "m:Q") is None
    assert validate_claim_result(("t", 3, 61), "m:Q") == ("t", 3, 61.0)
    assert validate_finish_result(False, "m:Q") is False
    assert validate_snapshot([("t", "pending", 0, None), ["u", "running", 2, 9]], "m:Q") == [
        ("t", "pending", 0, None),
        ("u", "running", 2, 9.0),
    ]


@pytest.mark.parametrize(
    "value",
    [("t", 1), ("t", "1", 2.0), (1, 1, 2.0), ("t", True, 2.0), ("t", 1, "soon"), 7],
)
def test_claim_validator_rejects_wrong_shapes(value: object) -> None:
    with pytest.raises(ContractError, match=r"claim\(\) returned"):
        validate_claim_result(value, "m:Q")


@pytest.mark.parametrize("value", [None, 1, "true"])
def test_finish_validator_rejects_non_bools(value: object) -> None:
    with pytest.raises(ContractError, match=r"finish\(\) returned"):
        validate_finish_result(value, "m:Q")
