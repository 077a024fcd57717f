"""A test that needs a missing system package skips with one line naming what to install, and fails
instead under CI=true (tests/helpers/system_packages.py); scripts/system-packages, which knows the
packages, refuses a name it does not know.

The inner sessions run the hook of tests/conftest.py on a test marked ``needs_package``; what the machine
lacks is set by replacing the script's answer (the packages are installed here, or the session is CI's).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from tests.helpers import node_needs, system_packages

pytest_plugins = ["pytester"]

INNER = """
    import pytest

    @pytest.mark.needs_package("fuse3")
    def test_mounts():
        pass

    @pytest.mark.needs_package("postgresql", "iptables")
    @pytest.mark.needs_package("iproute2")
    def test_hosts():
        pass
"""
CONFTEST = """
    import pytest
    from tests.helpers import system_packages

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(item):
        system_packages.require_packages(item)
"""
LINE = "needs fusermount3 and libfuse3: apt-get install fuse3"
HOSTS = {"iptables": "iptables", "iproute2": "ip"}  # postgresql is here
HOSTS_LINE = "needs iptables; ip: apt-get install iptables iproute2"


def _session(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, missing: dict[str, str], ci: str | None):
    monkeypatch.setattr(system_packages, "missing", lambda: missing)
    monkeypatch.setitem(system_packages.BEYOND_PACKAGE, "fuse3", lambda: "")  # the device is not the question
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_inner=INNER)
    return pytester.runpytest("-rs", "-p", "no:cacheprovider", "-p", "no:takeover")


@pytest.mark.parametrize("ci", [None, "false"])
def test_a_missing_package_skips_with_one_line_naming_what_to_install(pytester, monkeypatch, ci) -> None:
    result = _session(pytester, monkeypatch, {"fuse3": "fusermount3 and libfuse3", **HOSTS}, ci)
    result.assert_outcomes(skipped=2)
    said = [line for line in result.outlines if "needs" in line]
    assert len(said) == 2 and all(line.startswith("SKIPPED [1] ") for line in said), said
    assert said[0].endswith(f": {LINE}") and said[1].endswith(f": {HOSTS_LINE}"), said  # every missing one at once


def test_under_ci_a_missing_package_fails_the_test(pytester, monkeypatch) -> None:
    result = _session(pytester, monkeypatch, {"fuse3": "fusermount3 and libfuse3"}, "true")
    result.assert_outcomes(errors=1, passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([f"*{LINE} (CI=true: a test that needs a missing system package fails, not skips)"])


def test_where_the_package_is_there_the_test_runs(pytester, monkeypatch) -> None:
    _session(pytester, monkeypatch, {"postgresql": "initdb and pg_ctl"}, "true").assert_outcomes(passed=1, errors=1)


def test_a_mark_naming_a_package_the_script_does_not_know_is_an_error(pytester, monkeypatch) -> None:
    monkeypatch.setattr(system_packages, "missing", lambda: {})
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_inner=INNER.replace('"fuse3"', '"fuse"'))
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:takeover")
    result.assert_outcomes(errors=1, passed=1)
    result.stdout.fnmatch_lines(
        ["*needs_package('fuse'): scripts/system-packages knows only fuse3, postgresql, iptables, iproute2, nodejs,*"])


KNOWN = "fuse3 postgresql iptables iproute2 nodejs npm redis-server python3-venv g++"


def test_the_script_refuses_an_unknown_package_or_command_in_one_line() -> None:
    for argv, words in ((["missing", "fuse"], f"unknown package 'fuse' (known: {KNOWN})"),
                        (["install", "fuse"], f"unknown package 'fuse' (known: {KNOWN})"),
                        (["require", "fuse"], f"unknown package 'fuse' (known: {KNOWN})"),
                        (["offers"], "offers takes one package, got 0"),
                        (["remove"], "usage: scripts/system-packages list|missing|install|require|offers [PACKAGE...], "
                                     "got 'remove'")):
        done = subprocess.run([str(system_packages.SCRIPT), *argv], capture_output=True, text=True, timeout=30)
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr == f"system-packages: {words}\n"


def test_the_readme_names_every_package_make_test_installs() -> None:
    """The README's set-up names the Debian packages `make test` installs as root, in the script's order: one
    added to the script alone (redis-server was) leaves a user who is not root guessing what to install."""
    readme = (system_packages.SCRIPT.parents[1] / "README.md").read_text()
    said = re.search(r"`make test` also installs the Debian\s+packages some tests need \(([^)]*)\)", readme)
    assert said, "README.md no longer says which Debian packages `make test` installs"
    assert said[1].split(", ") == list(system_packages.known())


def test_without_ensurepip_make_is_told_in_one_line_what_to_install(tmp_path) -> None:
    """Debian's python3 makes no venv without python3-venv: `require`, which make runs before `python -m venv`,
    names it in one line and exits 1 where it cannot install it (here: a python with no ensurepip, on a PATH
    with no apt-get, so root cannot install it either)."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for program in ("bash", "id", "cut", "paste", "sed"):  # what the script runs on this path; no apt-get
        (bin_ / program).symlink_to(shutil.which(program) or program)
    python = bin_ / "python3"
    python.write_text("#!/bin/sh\nexit 1\n")  # `import ensurepip` fails, as on Debian without python3-venv
    python.chmod(0o755)
    env = {**os.environ, "PYTHON": str(python), "PATH": str(bin_)}
    why = f"ensurepip for {python} (python -m venv needs it)"
    for verb, code, out, err in (("missing", 0, f"python3-venv\t{why}\n", ""),
                                 ("require", 1, "", f"system-packages: missing {why}: as root, apt-get install "
                                                    "python3-venv\n")):
        done = subprocess.run([str(system_packages.SCRIPT), verb, "python3-venv"], capture_output=True, text=True,
                              env=env, timeout=30)  # fmt: skip
        assert (done.returncode, done.stdout, done.stderr) == (code, out, err)


def test_without_a_compiler_make_js_is_told_in_one_line_what_to_install(tmp_path) -> None:
    """better-sqlite3's addon is compiled where node is new enough (offline: no prebuilt one): `require g++`, which
    make js runs first, names it in one line and exits 1 where it cannot install it (a PATH with no cc, no c++ and
    no apt-get); a compiler there counts, however it was installed."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for program in ("bash", "id", "cut", "paste", "sed"):  # what the script runs on this path; no apt-get
        (bin_ / program).symlink_to(shutil.which(program) or program)
    env = {**os.environ, "PATH": str(bin_)}
    why = "cc (a C compiler) and c++ (a C++ compiler)"
    for verb, code, out, err in (("missing", 0, f"g++\t{why}\n", ""),
                                 ("require", 1, "", f"system-packages: missing {why}: as root, apt-get install g++\n")):
        done = subprocess.run([str(system_packages.SCRIPT), verb, "g++"], capture_output=True, text=True, env=env,
                              timeout=30)  # fmt: skip
        assert (done.returncode, done.stdout, done.stderr) == (code, out, err)
    for program in ("cc", "c++"):
        (bin_ / program).write_text("#!/bin/sh\n")
        (bin_ / program).chmod(0o755)
    done = subprocess.run([str(system_packages.SCRIPT), "require", "g++"], capture_output=True, text=True, env=env,
                          timeout=30)  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_an_adapter_needs_the_node_its_libraries_ask_for() -> None:
    """What an adapter of adapters/js needs is read from what it loads (its own files too) and the engines the
    lock file pins: pg-boss 10 and better-sqlite3 12 ask for node 20, pg for 16 (Debian 12's nodejs is 18)."""
    assert node_needs.node_needed("pgboss.js") == (20, "pg-boss 10.4.2: >=20")
    assert node_needs.node_needed("postgres.js") == (16, "pg 8.23.1: >= 16.0.0")  # through its own ./checks too
    sqlite = node_needs.node_needed("sqlite.js")
    assert sqlite[0] == 20 and sqlite[1].startswith("better-sqlite3 12.")
    assert node_needs.node_needed("reference.js") == sqlite  # both databases' files, through ./sqlite
    assert node_needs.node_needed("better-sqlite3") == sqlite  # a library by name, as make js asks
    assert node_needs.oldest_major("6.* || 8.* || >= 10.*") == 6
    assert node_needs.oldest_major("*") == 0


NODE_INNER = """
    import pytest

    @pytest.mark.needs_node_for("pgboss.js")
    def test_pgboss():
        pass
"""
NODE_LINE = ("pgboss.js needs node 20 or newer (pg-boss 10.4.2: >=20); node here is v18.19.0 and apt-get's nodejs is "
             "{apt}: install node 20 or newer (nodejs.org, NodeSource)")


@pytest.mark.parametrize(("apt", "outcome"), [("18.19.0", "skipped"), ("20.19.2", "errors")])
def test_a_node_too_old_for_an_adapter_skips_naming_the_version(pytester, monkeypatch, apt, outcome) -> None:
    """Under CI=true: Debian 12 offers node 18 only, so there even CI skips the adapter (it could not have had
    node 20); where apt-get offers node 20 the set-up should have installed it, and CI fails. (Without CI the
    line is the same skip: the branch of require_packages that every skip takes.)"""
    monkeypatch.setattr(node_needs, "node_version", lambda: "v18.19.0")
    monkeypatch.setattr(system_packages, "offered", lambda package: apt)
    monkeypatch.setenv("CI", "true")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_inner=NODE_INNER)
    result = pytester.runpytest("-rs", "-p", "no:cacheprovider", "-p", "no:takeover")
    result.assert_outcomes(**{outcome: 1})
    said = [line for line in result.outlines if "pgboss.js needs" in line]
    assert len(said) == 1 and NODE_LINE.format(apt=apt) in said[0], result.outlines
    monkeypatch.setattr(node_needs, "node_version", lambda: "v20.19.2")
    assert system_packages.node_too_old("pgboss.js") == ("", False)
