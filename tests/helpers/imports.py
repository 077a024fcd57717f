"""What a module imports, read from its source, and what the runner (``takeover.run``) must never import.

Shared by the unit test that reads the run package's source and the system test that imports the
whole package in a fresh process (tests/unit/test_run_package.py, tests/system/test_run_package.py).
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

from tests.helpers.processes import REPO

RUN_PACKAGE = REPO / "harness" / "run"
# What the runner must never import: the workload it runs, and everything that reads a run folder.
FOREIGN = ("takeover.workloads.", "takeover.checker", "takeover.reports", "takeover.commands", "takeover.soak",
           "takeover.sweep")  # fmt: skip


def imported_modules(path: Path) -> set[str]:
    """Every module an ``import`` statement in the file names, at any depth (inside functions too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            # ``from ..checker import x`` and ``from .. import reports`` resolve against the file's own
            # package, as the import system does; the imported names may be modules too.
            base = (importlib.util.resolve_name("." * node.level + (node.module or ""), _package(path))
                    if node.level else node.module or "")
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def _package(path: Path) -> str:
    """The installed package a file under harness/ belongs to (harness/run/x.py -> takeover.run)."""
    parts = path.resolve().relative_to(REPO / "harness").parent.parts
    return ".".join(("takeover", *parts))


def foreign_to_the_runner(names: set[str] | list[str]) -> list[str]:
    """The names among ``names`` the runner must not import (the package ``takeover.workloads`` itself
    is fine: the profiles are files in it, found through it by config.py)."""
    return sorted(n for n in names if n.startswith(FOREIGN))
