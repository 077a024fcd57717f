"""Installed, takeover is the package ``takeover`` and nothing else beside a user's own packages.

The source keeps the folders the design card fixes (harness/, reports/, workloads/); pyproject.toml maps
them into one import name. These tests catch the two ways that mapping breaks: a new subpackage that
the explicit package list forgets (it would be missing from every install but the editable one), and
anything else landing at the top of site-packages.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FOLDERS = {"takeover": "harness", "takeover.reports": "reports", "takeover.workloads": "workloads"}


def _setuptools() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_source_package_is_installed_under_takeover() -> None:
    config = _setuptools()
    assert config["package-dir"] == FOLDERS
    on_disk = set()
    for name, folder in FOLDERS.items():
        root = REPO / folder
        for folder_path in [root, *(p for p in root.rglob("*") if p.is_dir() and p.name != "__pycache__")]:
            rel = folder_path.relative_to(root)
            on_disk.add(".".join([name, *rel.parts]))
    assert on_disk == set(config["packages"])


def test_profiles_and_the_scenarios_spec_load_from_the_installed_package() -> None:
    from takeover._internal.config import profile_names
    from takeover._internal.scenario.replay import scenario_ids

    assert {"smoke", "stress"} <= set(profile_names())
    assert scenario_ids() == ["S1", "S2", "S3", "S4", "S5"]


@pytest.mark.slow
def test_the_wheel_holds_only_takeover_and_its_dist_info(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(tmp_path),
         str(REPO)],
        check=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    (wheel,) = tmp_path.glob("takeover-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    from takeover import __version__

    assert {n.split("/")[0] for n in names} == {"takeover", f"takeover-{__version__}.dist-info"}
    for needed in ("takeover/py.typed", "takeover/data/scenarios.json", "takeover/workloads/stress.toml",
                   "takeover/workloads/smoke.toml", "takeover/reports/html.py", "takeover/_internal/checker/check.py",
                   "takeover/pytest_plugin.py", "takeover/data/ci/takeover.yml",
                   "takeover/data/ci/test_takeover.py.tmpl"):
        assert needed in names
    entry_points = zipfile.ZipFile(wheel).read(f"takeover-{__version__}.dist-info/entry_points.txt").decode()
    assert "[pytest11]\ntakeover = takeover.pytest_plugin" in entry_points
