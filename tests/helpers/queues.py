"""The fixture queues, and the one way any process finds them: by module name, on the path.

The queues that tests hand to ``--queue`` (tests/fixtures/queues/) are named exactly as a user names
their own queue, ``MODULE:ATTR`` with a plain module name (``flaky_queue:FlakyQueue``), because that
is the path under test: ``takeover`` imports the module in the command, in every worker process and
in the service's parent. So the folder is not a package. It is put on the path here and only here:
``on_path`` for the test process itself (tests/conftest.py calls it once, for commands run in
process), ``child_env`` for every subprocess, whose workers inherit PYTHONPATH.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

FIXTURE_QUEUES = Path(__file__).resolve().parent.parent / "fixtures" / "queues"


def on_path() -> None:
    """Make the fixture queues importable by module name in this process (idempotent)."""
    folder = str(FIXTURE_QUEUES)
    if folder not in sys.path:
        sys.path.insert(0, folder)


def child_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with the fixture queues first on PYTHONPATH."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(FIXTURE_QUEUES), env.get("PYTHONPATH", "")) if p)
    return env
