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
from pathlib import Path

import pytest

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
