"""The system packages some tests need, and what a test does where one is missing.

scripts/system-packages is the one place that knows them (Debian's fuse3 for the power-loss layer's FUSE
mount, postgresql for the private servers of ``--db postgres``, nodejs and npm for the JavaScript adapters
in adapters/js, whose libraries ``make`` installs with npm ci) and how to tell that one is missing;
``make test`` and .ci/run install them through it when they run as root. A test that needs one says so
with ``@pytest.mark.needs_package("fuse3")``; where the package is missing (a user who is not root ran
``make test``, so nothing was installed) the test skips with one line naming what to install. With
``CI=true`` that skip is a failure instead: CI installs every package, so a skip there means its set-up
broke, and a run that skips the power-loss or PostgreSQL tests must not go green.

Where fuse3 is installed but FUSE still cannot mount (no /dev/fuse in a container, no permission to open
it), the test skips (or fails in CI) with takeover's own one-line reason (``takeover.powerloss.layer``).
"""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "system-packages"
MARK = "needs_package"
CI_VALUES = ("true", "1", "yes")  # what CI services set CI to (GitHub, GitLab: "true")


@functools.cache
def known() -> tuple[str, ...]:
    """The packages the script knows: a mark that names another is a mistake in the test."""
    return tuple(_script("list").split())


@functools.cache
def missing() -> dict[str, str]:
    """Each missing package of the script's list, with what of it is missing ("fusermount3 and libfuse3")."""
    return dict(line.split("\t", 1) for line in _script("missing").splitlines())


def _script(*args: str) -> str:
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, check=True, timeout=60).stdout


def _fuse_mounts() -> str:
    from takeover.powerloss import layer

    why = layer.unavailable()
    return f"needs FUSE: {why}" if why else ""


def _js_libraries() -> str:
    """adapters/js's libraries, which ``make`` installs with npm ci once node and npm are here, with
    better-sqlite3's addon (fetched or compiled by its install script: make js runs it)."""
    modules = SCRIPT.parents[1] / "adapters" / "js" / "node_modules"
    installed = (modules / ".package-lock.json").is_file()
    built = (modules / "better-sqlite3" / "build" / "Release" / "better_sqlite3.node").is_file()
    return "" if installed and built else "needs adapters/js's libraries: run make js (npm ci in adapters/js)"


# What must work beyond the package's files, as takeover itself checks it before it starts.
BEYOND_PACKAGE: dict[str, Callable[[], str]] = {"fuse3": _fuse_mounts, "npm": _js_libraries}


def why_not(package: str) -> str:
    """One line saying what to install for ``package`` (or what else is missing); empty when it is all here."""
    if package not in known():
        raise ValueError(f"{MARK}({package!r}): scripts/system-packages knows only {', '.join(known())}")
    what = missing().get(package)
    if what:
        return f"needs {what}: apt-get install {package}"
    beyond = BEYOND_PACKAGE.get(package)
    return beyond() if beyond else ""


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in CI_VALUES


def require_packages(item: pytest.Item) -> None:
    """Skip ``item`` (fail it under CI=true) when a package one of its ``needs_package`` marks names is missing."""
    for mark in item.iter_markers(MARK):
        for package in mark.args:
            why = why_not(package)
            if why and in_ci():
                pytest.fail(f"{why} (CI=true: a test that needs a missing system package fails, not skips)",
                            pytrace=False)  # fmt: skip
            if why:
                pytest.skip(why)
