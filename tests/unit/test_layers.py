"""The floors of the package (pyproject.toml, ``[tool.importlinter]``) hold, and name every module.

Why a test beside ``make lint``: the floors are what keep the checker off the runner and the library
off the command line, and `make test` is what a contributor runs; and a module that no floor names is
checked by no contract, so a new top-level module must be given its floor (the test says which).
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from tests.helpers.processes import REPO

PYPROJECT = REPO / "pyproject.toml"


def _floors() -> list[str]:
    contracts = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]
    (layers,) = [c for c in contracts if c["type"] == "layers" and c["containers"] == ["takeover"]]
    return [name.strip() for floor in layers["layers"] for name in floor.replace(":", "|").split("|")]


def _installed_names(floors: list[str]) -> set[str]:
    """The package's top-level modules and packages as installed: harness/'s, with reports and workloads;
    a package whose modules stand on floors of their own (``net.hosts``) by those modules."""
    def entries(folder: Path, prefix: str) -> set[str]:
        found = {prefix + p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
        return found | {prefix + p.name for p in folder.iterdir() if (p / "__init__.py").is_file()}

    names = entries(REPO / "harness", "") | {"reports", "workloads"}
    expand = {".".join(f.split(".")[:i]) for f in floors for i in range(1, f.count(".") + 1)}
    for package in sorted(expand, key=len):  # _internal before _internal.net
        names.discard(package)
        names |= entries(REPO / "harness" / package.replace(".", "/"), package + ".")
    return names


def test_every_module_of_the_package_stands_on_a_floor() -> None:
    floors = _floors()
    assert len(floors) == len(set(floors)), "a module is on two floors"
    assert not _installed_names(floors) - set(floors), "give these modules a floor in pyproject.toml"
    assert not set(floors) - _installed_names(floors), "these floors name no module"


def test_the_contracts_are_kept(tmp_path: Path) -> None:
    """lint-imports on the package laid out as installed (as `make lint` lays it out)."""
    tree = tmp_path / "takeover"
    tree.mkdir()
    for entry in (REPO / "harness").iterdir():
        if entry.name != "__pycache__":
            (tree / entry.name).symlink_to(entry)
    for folder in ("reports", "workloads"):
        (tree / folder).symlink_to(REPO / folder)
    proc = subprocess.run([str(Path(sys.executable).parent / "lint-imports"), str(PYPROJECT),
                           "--no-cache"], cwd=tmp_path, env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout
