"""Where a queue's code lives, as this process imported it: what a fresh shell needs when no folder a command
searches holds the module (takeover._internal.locate). The reproduce lines of real runs that depend on it are
in tests/system/test_api.py; the current folder and PYTHONPATH in tests/unit/test_config.py.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from takeover._internal.locate import Location, locate
from takeover.errors import UsageError


def _import_by_file(monkeypatch: pytest.MonkeyPatch, name: str, file: Path) -> None:
    """Import ``file`` as module ``name`` without its folder on the path (as pytest's importlib mode does)."""
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text("class Q:\n    pass\n")
    spec = importlib.util.spec_from_file_location(name, file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)


def test_a_module_imported_from_a_folder_on_no_path_is_located_in_that_folder(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "tests of mine"
    _import_by_file(monkeypatch, "locate_by_file", folder / "locate_by_file.py")
    assert locate("locate_by_file:Q") == Location(pythonpath=(str(folder),))
    assert locate("locate_by_file_not_imported:Q") == Location()  # neither found nor imported: nothing to add


def test_a_module_of_a_package_imported_by_file_is_located_at_the_packages_folder(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    _import_by_file(monkeypatch, "locate_pkg.queues", tmp_path / "lib" / "locate_pkg" / "queues.py")
    assert locate("locate_pkg.queues:Q") == Location(pythonpath=(str(tmp_path / "lib"),))


def test_a_module_imported_under_a_name_its_file_does_not_give_is_one_line(tmp_path, monkeypatch) -> None:
    """Worker processes import the queue by its name: a name that does not lead to the file cannot work."""
    monkeypatch.chdir(tmp_path)
    _import_by_file(monkeypatch, "locate_renamed", tmp_path / "lib" / "other_name.py")
    with pytest.raises(UsageError, match=r"^queue module 'locate_renamed' was imported under a name that does not "
                                         r"match where its file is \(.*other_name\.py\), so worker processes"):
        locate("locate_renamed:Q")


def test_a_module_found_on_the_path_is_located_where_the_path_finds_it(tmp_path, monkeypatch) -> None:
    """The path comes first: a command (and a fresh process) imports the module from there."""
    monkeypatch.chdir(tmp_path)
    _import_by_file(monkeypatch, "locate_twice", tmp_path / "imported" / "locate_twice.py")
    (tmp_path / "on_path").mkdir()
    (tmp_path / "on_path" / "locate_twice.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path / "on_path"))
    assert locate("locate_twice:Q") == Location(pythonpath=(str(tmp_path / "on_path"),))
