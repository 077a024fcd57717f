"""No import inside a function of the package dodges an import cycle.

Why: an import moved into a function runs when the function is first called, not when the module loads,
so it hides a cycle from Python, from ``make lint``'s contracts (which see the import, but not that it
closes a loop) and from a reader: two modules that need each other look like two rooms. The floors of
pyproject.toml keep cycles out between the packages; this test keeps them out everywhere, by reading every
module's imports (as the package is installed: harness/ is ``takeover``, reports/ and workloads/ are
``takeover.reports`` and ``takeover.workloads``). An import inside a function stays legitimate where it
only defers a cost (pandas, the command line, an optional library): those close no loop.

A function-level import ``A -> B`` dodges a cycle when ``B`` imports ``A`` back, at module level or inside a
function of its own, directly or through other modules: at the top of ``A`` it would fail (or half-load one
of them), or the two modules are one room that only looks like two.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.helpers.processes import REPO

FOLDERS = {"harness": "takeover", "reports": "takeover.reports", "workloads": "takeover.workloads"}
TYPE_CHECKING = ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def modules() -> dict[str, Path]:
    """Every module of the package by its installed name."""
    found = {}
    for folder, package in FOLDERS.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            parts = list(path.relative_to(REPO / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


def _targets(node: ast.Import | ast.ImportFrom, name: str, is_package: bool, known: dict[str, Path]) -> set[str]:
    """The modules of the package an import statement loads: a submodule named in ``from X import Y``
    is that submodule; any other name imported from X is X itself."""
    if isinstance(node, ast.Import):
        wanted = [(alias.name, ()) for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            here = name.split(".") if is_package else name.split(".")[:-1]
            here = here[: len(here) - (node.level - 1)]
            base = ".".join(here + ([node.module] if node.module else []))
        wanted = [(base, tuple(alias.name for alias in node.names))]
    out = set()
    for module, names in wanted:
        if not module.startswith("takeover"):
            continue
        subs = {f"{module}.{n}" for n in names if f"{module}.{n}" in known}
        out |= subs
        if not names or len(subs) < len(names):
            parts = module.split(".")
            while parts and ".".join(parts) not in known:
                parts.pop()
            if parts:
                out.add(".".join(parts))
    out.discard(name)
    return out


def imports(name: str, path: Path, known: dict[str, Path]) -> Iterator[tuple[bool, str, int]]:
    """(inside a function, module imported, line) for every import of the package in one module; those
    under ``if TYPE_CHECKING:`` are left out (they run under the type checker alone)."""
    is_package = path.name == "__init__.py"

    def walk(node: ast.AST, inside: bool) -> Iterator[tuple[bool, str, int]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and ast.unparse(child.test) in TYPE_CHECKING:
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                for target in _targets(child, name, is_package, known):
                    yield inside, target, child.lineno
            yield from walk(child, inside or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    yield from walk(ast.parse(path.read_text(encoding="utf-8")), False)


def cycle_dodgers(known: dict[str, Path]) -> list[str]:
    """Every import inside a function whose module imports the importer back (by any import)."""
    edges: dict[str, set[str]] = {name: set() for name in known}
    deferred: list[tuple[str, str, int]] = []
    for name, path in known.items():
        for inside, target, line in imports(name, path, known):
            edges[name].add(target)
            if inside:
                deferred.append((name, target, line))

    def reaches(start: str, goal: str) -> bool:
        seen, todo = {start}, [start]
        while todo:
            for nxt in edges[todo.pop()]:
                if nxt == goal:
                    return True
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return False

    def where(path: Path) -> Path:
        return path.relative_to(REPO) if path.is_relative_to(REPO) else Path(path.name)

    return [f"{where(known[a])}:{line}: {a} imports {b} inside a function, and {b} imports {a} back"
            for a, b, line in deferred if reaches(b, a)]


def test_no_import_inside_a_function_dodges_a_cycle() -> None:
    dodgers = cycle_dodgers(modules())
    assert not dodgers, "split the modules so one stands below the other:\n" + "\n".join(dodgers)


def test_the_check_sees_a_cycle_dodged(tmp_path: Path) -> None:
    """The check itself can fail: of two modules that import each other, one of them inside a function
    (as b does here), that import is named; so are both of two deferred imports that close a loop (d and
    e); a deferred import that closes no loop (c's) is not, nor one under ``if TYPE_CHECKING:``."""
    known = {f"takeover.{m}": tmp_path / f"{m}.py" for m in "abcde"}
    known["takeover.a"].write_text("from takeover.b import g\n\n\ndef f():\n    return g()\n")
    known["takeover.b"].write_text("def g():\n    from takeover.a import f\n\n    return f\n")
    known["takeover.c"].write_text("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    import takeover.a\n\n\n"
                                   "def h():\n    from takeover import b\n\n    return b\n")
    known["takeover.d"].write_text("def f():\n    import takeover.e\n")
    known["takeover.e"].write_text("def g():\n    import takeover.d\n")
    assert cycle_dodgers(known) == [
        "b.py:2: takeover.b imports takeover.a inside a function, and takeover.a imports takeover.b back",
        "d.py:2: takeover.d imports takeover.e inside a function, and takeover.e imports takeover.d back",
        "e.py:2: takeover.e imports takeover.d inside a function, and takeover.d imports takeover.e back",
    ]
