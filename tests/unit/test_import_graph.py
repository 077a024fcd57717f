"""The checker's import graph: a stored run folder is all the checker needs.

Why a test: ``takeover check RUN_DIR`` must give the same verdict on any machine with takeover
installed, whether or not the queue under test is, and the data must flow one way (run -> run
folder -> checker -> result -> reports). Both break silently the day a checker module imports the
runner, the queue's code, a command or a report, even inside a function. So every module under
takeover.checker is parsed (not imported), and every ``takeover`` module it imports at run time is
followed in turn: all of them must be the checker itself or the few modules that define the run
folder's format.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import takeover.checker

# The checker, and what it may lean on: the run-folder store, the history's reader, the errors and
# the exit codes (a module that imports nothing, shared with the commands), and the model-coverage space
# (takeover.coverage_space: pure, imports nothing; the explorer and the nemesis share it).
ALLOWED = ("takeover.checker", "takeover.store", "takeover.history", "takeover.errors", "takeover.exit_codes",
           "takeover.coverage_space")


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _run_time_imports(tree: ast.AST, module: str, is_package: bool) -> list[tuple[str, int]]:
    """``(module imported, line)`` for every import that runs (``if TYPE_CHECKING:`` blocks do not),
    wherever it stands: at the top, in a function, in a branch."""
    found: list[tuple[str, int]] = []
    package = module if is_package else module.rpartition(".")[0]

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = importlib.util.resolve_name("." * node.level + (node.module or ""), package) \
                if node.level else node.module or ""
            for alias in node.names:  # ``from takeover import store`` imports the module takeover.store
                sub = f"{base}.{alias.name}"
                found.append((sub if _is_takeover(base) and _exists(sub) else base, node.lineno))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _is_takeover(module: str) -> bool:
    return module == "takeover" or module.startswith("takeover.")


def _exists(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _source(module: str) -> tuple[Path, bool]:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin, module
    return Path(spec.origin), spec.submodule_search_locations is not None


def _allowed(module: str) -> bool:
    return any(module == a or module.startswith(a + ".") for a in ALLOWED)


def offences(roots: list[str]) -> list[str]:
    """Every run-time import, reachable from ``roots`` through takeover modules, of a takeover
    module outside ALLOWED, as ``file:line imports module``."""
    seen: set[str] = set()
    todo = list(roots)
    bad: list[str] = []
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        path, is_package = _source(module)
        for name, line in _run_time_imports(ast.parse(path.read_text()), module, is_package):
            if not _is_takeover(name):
                continue  # the standard library and third-party packages
            if _allowed(name):
                todo.append(name)
            else:
                bad.append(f"{path.name}:{line} ({module}) imports {name}")
    return sorted(bad)


def checker_modules() -> list[str]:
    folder = Path(takeover.checker.__file__).parent
    return ["takeover.checker"] + [f"takeover.checker.{p.stem}" for p in sorted(folder.glob("*.py"))
                                   if p.stem != "__init__"]


def test_the_checker_imports_only_the_run_folder_format() -> None:
    assert len(checker_modules()) > 5  # the walk found the checker's modules
    assert offences(checker_modules()) == []


def test_the_walk_sees_a_forbidden_import_inside_a_function(tmp_path) -> None:
    """The graph test itself can fail: a function-local import of the reports is found."""
    tree = ast.parse("def f():\n    from takeover.reports import write_reports\n")
    assert _run_time_imports(tree, "takeover.checker.x", False) == [("takeover.reports", 2)]
    typed = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from takeover.config import X\n")
    assert _run_time_imports(typed, "takeover.checker.x", False) == [("typing", 1)]
    relative = ast.parse("from . import facts\nfrom ..store import read_config\n")
    assert _run_time_imports(relative, "takeover.checker.x", False) == [
        ("takeover.checker.facts", 1), ("takeover.store", 2)]
