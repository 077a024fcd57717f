"""Where a queue's code lives: the current folder first, as ``python -m`` looks, and what a fresh shell
needs to find it again.

Why the current folder first: a user names their queue from their own project folder
(``takeover scenarios --queue jobs_adapter:JobsAdapter``), as they would with ``python -m``, pytest or
uvicorn. The ``takeover`` console script's import path starts at its own ``bin`` folder instead, so
without this the module is "not found" although it sits right there.

Why record a location: a run's reproduce line must run again from a fresh shell, in CI or on a
colleague's machine. A queue found in the current folder needs that folder (``cd DIR && ...``), and
one found through ``PYTHONPATH`` (or any folder outside the installed packages) needs that folder on
the path (``PYTHONPATH=DIR ...``). :func:`locate` finds out which, without running the module's code
(only finders are asked, as ``importlib.util.find_spec`` does for a top-level name), so it is safe on
any text a user typed.

Why also what this process imported: the Python API runs in the user's own process, which may hold the
queue's module from a folder no fresh process searches (pytest puts a test's folder on its own path, or
imports a file by its path). That folder is what a fresh shell needs, and only the caller knows it: the
run's child is handed the answer (its PYTHONPATH and its config), never asked again.
"""

from __future__ import annotations

import contextlib
import os
import sys
import sysconfig
from dataclasses import dataclass
from importlib.machinery import ModuleSpec, PathFinder
from pathlib import Path
from types import ModuleType

from takeover.errors import UsageError

# Before the package was installed as ``takeover`` alone, its modules were ``harness.*``: stored runs and
# users' scripts still name queues that way, so those names are read as the ``takeover.*`` module they
# always meant (never as a second copy of it, which a checkout on sys.path would otherwise import).
LEGACY_PREFIX = "harness."


def canonical_module(module_name: str) -> str:
    """``harness.queues.x`` -> ``takeover.queues.x``; any other name unchanged."""
    if module_name.startswith(LEGACY_PREFIX):
        return "takeover." + module_name[len(LEGACY_PREFIX):]
    return module_name


@dataclass(frozen=True)
class Location:
    """What a fresh shell needs before ``takeover`` can import the queue again; empty for an installed one.

    ``workdir``: the folder to run from (the queue was found in the current folder, or the profile is a
    relative path). ``pythonpath``: folders to put on ``PYTHONPATH`` (the queue was found in a folder
    that is neither installed nor the current one).
    """

    workdir: str | None = None
    pythonpath: tuple[str, ...] = ()


def top_level(queue: str) -> str | None:
    """``pkg.sub.mod:Attr`` -> ``pkg``; None for text that names no importable module."""
    module = canonical_module(queue.partition(":")[0]) if isinstance(queue, str) else ""
    top = module.split(".")[0]
    return top if top.isidentifier() else None


def _current() -> str:
    return os.getcwd()


def _search_path(cwd: str) -> list[str]:
    """The import path a command searches for a queue: the current folder first, then ``sys.path``
    (an empty entry is the current folder too)."""
    return [cwd, *(p for p in sys.path if p and os.path.abspath(p) != cwd)]


def _root(spec: ModuleSpec) -> str | None:
    """The folder that holds a top-level module or package: the one to put on the import path."""
    if spec.submodule_search_locations:
        return str(Path(next(iter(spec.submodule_search_locations))).parent)
    if spec.origin and spec.origin not in ("built-in", "frozen"):
        return str(Path(spec.origin).parent)
    return None


def find_root(queue: str) -> str | None:
    """The folder a command would import the queue's top-level module from (current folder first),
    or None: not found on the path (an editable install's own finder, a builtin, a typo)."""
    top = top_level(queue)
    if top is None:
        return None
    spec = PathFinder.find_spec(top, _search_path(_current()))
    return None if spec is None else _root(spec)


def cwd_first(queue: str) -> None:
    """Put the current folder first on ``sys.path`` when the queue's module is there, as ``python -m``
    does. Nothing changes otherwise, so a caller's path is left alone when the folder does not matter.

    The folder goes in as an absolute path: worker processes inherit ``sys.path``, and a relative entry
    would mean another folder in a process that changed its own.
    """
    cwd = _current()
    if find_root(queue) == cwd and sys.path[:1] != [cwd]:
        sys.path.insert(0, cwd)


def run_folders_first(config: dict[str, object]) -> None:
    """Put a stored run's own import folders (config.json ``workdir`` and ``pythonpath``) first on
    ``sys.path``, so a command that loads the run's queue again (``takeover replay``) finds the user's
    module from any folder, as the run's reproduce line does with ``cd`` and ``PYTHONPATH``. Folders
    that no longer exist are left out: the usual "not found" error then says where it looked.
    """
    pythonpath = config.get("pythonpath")
    folders = [config.get("workdir"), *(pythonpath if isinstance(pythonpath, list) else [])]
    for folder in reversed([f for f in folders if isinstance(f, str) and os.path.isdir(f)]):
        if sys.path[:1] != [folder]:
            sys.path.insert(0, folder)


def _installed_roots() -> list[str]:
    """The folders every fresh interpreter searches: the standard library and site-packages."""
    paths = sysconfig.get_paths()
    roots = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    return [os.path.realpath(r) for r in roots]


def installed(path: str) -> bool:
    """Whether ``path`` is in a folder every fresh interpreter searches (the standard library, site-packages)."""
    real = os.path.realpath(path)
    return any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in _installed_roots())


def imported_from(queue: str) -> str | None:
    """The folder this process imported the queue's module from, when no folder a command searches holds
    it (:func:`find_root` found none): None when it is not imported here, or an import hook other than the
    path's finds it (an editable install's finder), which a fresh process has too. Raises a one-line
    UsageError when the module's name does not lead to its file: worker processes import it by that name."""
    module = canonical_module(queue.partition(":")[0])
    loaded = sys.modules.get(module) if top_level(queue) is not None else None
    if loaded is None or not getattr(loaded, "__file__", None) or _hooked(queue):
        return None
    root = _loaded_root(loaded, module)
    if root is None:
        raise UsageError(f"queue module {module!r} was imported under a name that does not match where its file "
                         f"is ({loaded.__file__}), so worker processes cannot import it by that name")
    return root


def _hooked(queue: str) -> bool:
    """Whether an import hook other than the path's finds the queue's top-level module."""
    top = top_level(queue)
    for finder in sys.meta_path:
        if top is None or finder is PathFinder or not hasattr(finder, "find_spec"):
            continue
        with contextlib.suppress(Exception):
            if finder.find_spec(top, None) is not None and top not in sys.builtin_module_names:
                return True
    return False


def _loaded_root(module: ModuleType, name: str) -> str | None:
    """The folder to put on the path so that ``import name`` finds this module's file again."""
    path = Path(str(module.__file__)).resolve()
    parts = name.split(".")
    depth = len(parts) - 1 + (path.name == "__init__.py")
    root = path.parents[depth]
    expected = root.joinpath(*parts)
    if path not in (expected.with_suffix(path.suffix), expected / "__init__.py"):
        return None  # imported under a name its file's place does not give (e.g. pytest's importlib mode)
    return str(root)


def locate(queue: str, profile: str | None = None) -> Location:
    """What a fresh shell needs to run a command with this queue (and profile) again: the queue's folder
    where a command looks for it (:func:`find_root`), else where this process imported it from
    (:func:`imported_from`). Raises UsageError, in one line, for a module this process imported whose name
    does not lead to its file (a fresh shell could not import it by that name), on every path that locates:
    the API, ``takeover stress`` and the sweep alike."""
    cwd = _current()
    workdir: str | None = None
    pythonpath: tuple[str, ...] = ()
    root = None if queue.startswith("exec:") else find_root(queue) or imported_from(queue)
    if queue.startswith("exec:"):
        workdir = cwd  # the adapter's command is run from the folder it was given from
    if root is not None and not installed(root):
        if os.path.realpath(root) == os.path.realpath(cwd):
            workdir = cwd
        else:
            pythonpath = (os.path.abspath(root),)
    if profile and (profile.endswith(".toml") or "/" in profile) and not os.path.isabs(profile):
        workdir = cwd  # a profile given as a relative path is read from the current folder
    return Location(workdir, pythonpath)


def not_found_hint() -> str:
    """The end of the one-line error for a queue module that cannot be found."""
    return (f"looked in the current folder ({_current()}) and on the import path; run from the folder that "
            f"holds it, or add that folder to PYTHONPATH")

