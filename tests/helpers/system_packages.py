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
it), the test skips (or fails in CI) with takeover's own one-line reason (``takeover._internal.powerloss.layer``).

A JavaScript adapter also needs a node new enough for the libraries it loads (pg-boss 10 asks for node 20;
Debian 12's nodejs is 18): ``@pytest.mark.needs_node_for("reference.js")`` reads what the adapter loads and
what those libraries ask (adapters/js/package-lock.json's ``engines``), and skips with one line naming the
version where the node here is older. Under CI=true that skip fails only where the machine could have had
that node: when apt-get offers a nodejs new enough (the set-up should have given it); where the newest node
apt-get offers is older too (Debian 12), the adapter's tests skip in CI as well, saying so.
"""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers import node_needs

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "system-packages"
MARK = "needs_package"
NODE_MARK = "needs_node_for"
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
    from takeover._internal.powerloss import layer

    why = layer.unavailable()
    return f"needs FUSE: {why}" if why else ""


def _js_libraries() -> str:
    """adapters/js's libraries, which ``make`` installs with npm ci once node and npm are here, with
    better-sqlite3's addon (fetched or compiled by its install script: make js runs it) where node is new
    enough to load it (where it is not, make js leaves the addon out and the tests of sqlite.js skip on
    their ``needs_node_for``)."""
    modules = node_needs.JS / "node_modules"
    installed = (modules / ".package-lock.json").is_file()
    built = (modules / "better-sqlite3" / "build" / "Release" / "better_sqlite3.node").is_file()
    ok = installed and (built or node_needs.too_old("better-sqlite3") != "")
    return "" if ok else "needs adapters/js's libraries: run make js (npm ci in adapters/js)"


# What must work beyond the package's files, as takeover itself checks it before it starts.
BEYOND_PACKAGE: dict[str, Callable[[], str]] = {"fuse3": _fuse_mounts, "npm": _js_libraries}


def why_not(*packages: str) -> str:
    """One line saying what to install for ``packages`` (every missing one, so one install fixes them all), or
    what else is missing; empty when it is all here."""
    for package in packages:
        if package not in known():
            raise ValueError(f"{MARK}({package!r}): scripts/system-packages knows only {', '.join(known())}")
    gone = [package for package in known() if package in packages and package in missing()]  # the script's order
    if gone:
        return f"needs {'; '.join(missing()[package] for package in gone)}: apt-get install {' '.join(gone)}"
    beyond = [why for package in packages if package in BEYOND_PACKAGE and (why := BEYOND_PACKAGE[package]())]
    return beyond[0] if beyond else ""


@functools.cache
def offered(package: str) -> str:
    """The version apt-get would install of ``package`` (empty where it offers none)."""
    return _script("offers", package).strip()


def node_too_old(adapter: str) -> tuple[str, bool]:
    """One line saying which node ``adapter`` needs where the node here is older (empty where it is new
    enough, or where there is no node: ``needs_package("nodejs")`` says that), and whether apt-get could
    have given one new enough."""
    why = node_needs.too_old(adapter)
    if not why:
        return "", False
    need, _ = node_needs.node_needed(adapter)
    apt = offered("nodejs")
    where = f"apt-get's nodejs is {apt}" if apt else "apt-get offers no nodejs"
    return f"{why} and {where}: install node {need} or newer (nodejs.org, NodeSource)", node_needs.major(apt) >= need


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in CI_VALUES


def require_packages(item: pytest.Item) -> None:
    """Skip ``item`` (fail it under CI=true) when a package one of its ``needs_package`` marks names is missing,
    or when the node here is too old for an adapter its ``needs_node_for`` marks name (failing under CI=true
    only where apt-get offers a node new enough)."""
    packages = dict.fromkeys(package for mark in item.iter_markers(MARK) for package in mark.args)
    why = why_not(*packages)
    if why and in_ci():
        pytest.fail(f"{why} (CI=true: a test that needs a missing system package fails, not skips)", pytrace=False)
    if why:
        pytest.skip(why)
    for mark in item.iter_markers(NODE_MARK):
        for adapter in mark.args:
            why, could = node_too_old(adapter)
            if why and could and in_ci():
                pytest.fail(f"{why} (CI=true: apt-get offers that node, so the set-up should have installed it)",
                            pytrace=False)  # fmt: skip
            if why:
                pytest.skip(why)
