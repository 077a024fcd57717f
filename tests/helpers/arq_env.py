"""The arq adapter's environment, .venv-arq (``make arq``), for the tests that run arq.

arq 0.28.0 requires redis-py below 6, so it is not installed beside takeover: its adapter runs in its own
virtual environment and speaks the JSON-lines protocol (adapters/py/arq_adapter.py). ``make test`` makes
that environment first, so a test that needs it skips (naming ``make arq``) only where someone ran pytest
alone; with CI=true (.ci/run, after ``make test`` made it) the skip is a failure, as for a missing system
package.
"""

from __future__ import annotations

import os
import shlex
import time
from pathlib import Path
from typing import Any

import pytest

from takeover.contract import check_queue_object, has_extension

ROOT = Path(__file__).resolve().parents[2]
PYTHON = ROOT / ".venv-arq" / "bin" / "python"
ADAPTER = ROOT / "adapters" / "py" / "arq_adapter.py"
SERVE = ROOT / "adapters" / "py" / "serve.py"
# The command as the pages and `--queue` give it, from the repository's root.
QUEUE = "exec:.venv-arq/bin/python adapters/py/arq_adapter.py"


def queue(*args: str) -> str:
    """The official adapter as an ``exec:`` queue with absolute paths, so it runs from any folder."""
    return "exec:" + shlex.join([str(PYTHON), str(ADAPTER), *args])


def served(path: Path, attr: str) -> str:
    """A Python queue class served from .venv-arq by adapters/py/serve.py, as an ``exec:`` queue."""
    return "exec:" + shlex.join([str(PYTHON), str(SERVE), f"{path}:{attr}"])


def require() -> None:
    """Skip (fail under CI=true) where .venv-arq is missing."""
    if PYTHON.exists():
        return
    reason = f"{PYTHON.relative_to(ROOT)} is missing: run `make arq` (arq 0.28.0 in its own environment)"
    if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
        pytest.fail(f"{reason}; CI makes it (`make test`)")
    pytest.skip(reason)


def a_holds_t1(a: Any, b: Any, spec: str) -> float:
    """Worker A holds task t1 for a 1 s lease through queue ``a`` (an adapter of arq, opened as ``spec``)
    while B, through ``b``, finds nothing to claim: the opening of the wall-clock tests of both arq
    adapters (the official one and the one written from docs/adapters.md alone), each step checked as arq
    answers it: no heartbeat, no second job for a second register of the same id, the in-progress key
    holding the job. Returns the ``now`` of A's claim."""
    check_queue_object(a, spec)
    assert not has_extension(a, "extend"), "arq has no heartbeat"
    now = time.time()
    a.register("t1", now)
    a.register("t1", now)  # arq enqueues no second job with the same id
    assert (got := b.snapshot()) == [("t1", "pending", 0, None)], got
    assert (got := a.claim("A", now, 1.0)) == ("t1", 1, now + 1.0), got
    assert (got := b.claim("B", time.time(), 1.0)) is None, f"the in-progress key holds t1, B claimed {got}"
    return now
