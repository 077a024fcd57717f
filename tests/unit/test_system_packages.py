"""A test that needs a missing system package skips with one line naming what to install, and fails
instead under CI=true (tests/helpers/system_packages.py); scripts/system-packages, which knows the
packages, refuses a name it does not know.

The inner sessions run the hook of tests/conftest.py on a test marked ``needs_package``; what the machine
lacks is set by replacing the script's answer (the packages are installed here, or the session is CI's).
"""

from __future__ import annotations

import subprocess

import pytest

from tests.helpers import system_packages

pytest_plugins = ["pytester"]

INNER = """
    import pytest

    @pytest.mark.needs_package("fuse3")
    def test_mounts():
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
    result = _session(pytester, monkeypatch, {"fuse3": "fusermount3 and libfuse3"}, ci)
    result.assert_outcomes(skipped=1)
    said = [line for line in result.outlines if "needs" in line]
    assert len(said) == 1 and said[0].startswith("SKIPPED [1] ") and said[0].endswith(f": {LINE}"), said


def test_under_ci_a_missing_package_fails_the_test(pytester, monkeypatch) -> None:
    result = _session(pytester, monkeypatch, {"fuse3": "fusermount3 and libfuse3"}, "true")
    result.assert_outcomes(errors=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([f"*{LINE} (CI=true: a test that needs a missing system package fails, not skips)"])


def test_where_the_package_is_there_the_test_runs(pytester, monkeypatch) -> None:
    _session(pytester, monkeypatch, {"postgresql": "initdb and pg_ctl"}, "true").assert_outcomes(passed=1)


def test_a_mark_naming_a_package_the_script_does_not_know_is_an_error(pytester, monkeypatch) -> None:
    monkeypatch.setattr(system_packages, "missing", lambda: {})
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_inner=INNER.replace('"fuse3"', '"fuse"'))
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:takeover")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*needs_package('fuse'): scripts/system-packages knows only fuse3, postgresql, iptables, nodejs, npm*"])


def test_the_script_refuses_an_unknown_package_or_command_in_one_line() -> None:
    for argv, words in ((["missing", "fuse"], "unknown package 'fuse' (known: fuse3 postgresql iptables nodejs npm)"),
                        (["install", "fuse"], "unknown package 'fuse' (known: fuse3 postgresql iptables nodejs npm)"),
                        (["remove"], "usage: scripts/system-packages list|missing|install [PACKAGE...], got 'remove'")):
        done = subprocess.run([str(system_packages.SCRIPT), *argv], capture_output=True, text=True, timeout=30)
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr == f"system-packages: {words}\n"
