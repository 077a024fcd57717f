"""``takeover init-ci`` in this process: what it writes, what it keeps, and bad input in one line.

The written workflow's steps run as CI would run them in tests/system/test_user_project.py.
"""

from __future__ import annotations

import ast
import re

import pytest
import yaml

from takeover.cli import main


def test_it_writes_the_workflow_and_a_starter_test_and_overwrites_nothing(tmp_path, capsys) -> None:
    assert main(["init-ci", "--queue", "jobs.adapter:JobsAdapter", "--dir", str(tmp_path),
                 "--install", "takeover==0.1.0"]) == 0
    workflow = tmp_path / ".github" / "workflows" / "takeover.yml"
    doc = yaml.safe_load(workflow.read_text())
    assert doc["env"]["TAKEOVER_QUEUE"] == "jobs.adapter:JobsAdapter"
    assert doc["env"]["TAKEOVER_TESTS"] == "tests/test_takeover.py"
    on = doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on` key as true
    assert {"pull_request", "schedule", "workflow_dispatch"} <= set(on)
    install = [s["run"] for job in doc["jobs"].values() for s in job["steps"] if s.get("name") == "Install"]
    assert len(install) == 2 and all('"takeover==0.1.0"' in run for run in install)
    assert not re.search(r"@[A-Z]+@", workflow.read_text()), "every placeholder filled in"
    test = (tmp_path / "tests" / "test_takeover.py").read_text()
    tree = ast.parse(test)
    assert [n.name for n in tree.body if isinstance(n, ast.FunctionDef)] == ["test_the_spec_scenarios",
                                                                           "test_under_faults"]
    assert 'QUEUE = "jobs.adapter:JobsAdapter"' in test
    starter = tmp_path / "tests" / "test_takeover.py"
    assert capsys.readouterr().out.splitlines()[:2] == [f"wrote {workflow}", f"wrote {starter}"]

    workflow.unlink()
    (tmp_path / "tests" / "test_takeover.py").write_text("# mine\n")
    assert main(["init-ci", "--queue", "q:Q", "--dir", str(tmp_path)]) == 0
    assert "kept" in capsys.readouterr().out and (tmp_path / "tests" / "test_takeover.py").read_text() == "# mine\n"
    assert main(["init-ci", "--queue", "q:Q", "--dir", str(tmp_path)]) == 2
    assert "takeover.yml exists; --force overwrites it" in capsys.readouterr().err
    assert main(["init-ci", "--queue", "q:Q", "--dir", str(tmp_path), "--force"]) == 0
    assert 'QUEUE = "q:Q"' in (tmp_path / "tests" / "test_takeover.py").read_text()


@pytest.mark.parametrize("db", ["sqlite", "postgres"])
def test_every_step_runs_on_the_database_chosen(db: str, tmp_path) -> None:
    """``--db`` sets TAKEOVER_DB, and every takeover command and pytest call of the workflow passes it on,
    so one line of the workflow moves every step to another database."""
    argv = ["init-ci", "--queue", "q:Q", "--dir", str(tmp_path)]
    assert main(argv + (["--db", db] if db != "sqlite" else [])) == 0
    doc = yaml.safe_load((tmp_path / ".github" / "workflows" / "takeover.yml").read_text())
    assert doc["env"]["TAKEOVER_DB"] == db
    runs = [s["run"] for job in doc["jobs"].values() for s in job["steps"] if "run" in s and s["name"] != "Install"]
    assert len(runs) == 6
    explore = [s["run"] for s in doc["jobs"]["pull-request"]["steps"] if s.get("name", "").startswith("Explore")]
    assert len(explore) == 1 and "takeover explore" in explore[0] and "--out .takeover/explore" in explore[0]
    for run in runs:
        flag = "--takeover-db" if "pytest" in run else "--db"
        assert f'{flag} "$TAKEOVER_DB"' in run, run
    install = [s["run"] for job in doc["jobs"].values() for s in job["steps"] if s.get("name") == "Install"]
    assert all('[ "$TAKEOVER_DB" = postgres ]' in run and "apt-get install -y postgresql" in run for run in install)


@pytest.mark.parametrize(("argv", "words"), [
    (["--queue", "noattr"], "--queue must be MODULE:ATTR, got 'noattr'"),
    (["--queue", 'q:Q"; rm -rf /'], "--queue must be non-empty, without quotes"),
    (["--queue", "q:Q", "--install", ""], "--install must be non-empty"),
    (["--queue", "q:Q", "--dir", "/no/such/folder"], "--dir '/no/such/folder' is not a folder"),
    (["--queue", "q:Q", "--db", "mysql"], "--db: invalid choice: 'mysql'"),
])  # fmt: skip
def test_bad_input_is_one_line(argv, words, capsys) -> None:
    assert main(["init-ci", *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1


def test_shards_turn_the_nightly_sweep_and_soak_into_matrices_and_merges(tmp_path) -> None:
    assert main(["init-ci", "--queue", "q:Q", "--dir", str(tmp_path), "--shards", "3"]) == 0
    text = (tmp_path / ".github" / "workflows" / "takeover.yml").read_text()
    jobs = yaml.safe_load(text)["jobs"]
    assert jobs["sweep-shard"]["strategy"]["matrix"]["shard"] == [1, 2, 3]
    runs = " ".join(s.get("run", "") for s in jobs["sweep-shard"]["steps"])
    assert "--shard ${{ matrix.shard }}/3" in runs
    assert jobs["sweep-merge"]["needs"] == "sweep-shard"
    assert "takeover merge .takeover/shards/* --out .takeover/sweep" in str(jobs["sweep-merge"]["steps"])
    assert not any("takeover sweep" in s.get("run", "") for s in jobs["nightly"]["steps"]), "one sweep, sharded"
    soak = " ".join(s.get("run", "") for s in jobs["soak-shard"]["steps"])
    assert jobs["soak-shard"]["strategy"]["matrix"]["shard"] == [1, 2, 3] and "--shard ${{ matrix.shard }}/3" in soak
    assert "takeover merge .takeover/shards/*/soak --out .takeover/soak" in str(jobs["soak-merge"]["steps"])
    nightly = str(jobs["nightly"]["steps"])
    assert "takeover soak" not in nightly and "seed-bank" not in nightly, "the soak and its bank moved to the matrix"
    cache = [s["with"]["path"] for j in ("soak-shard", "soak-merge") for s in jobs[j]["steps"]
             if "cache" in s.get("uses", "")]
    assert cache == [".takeover/seed-bank.json"] * 2, "restored and saved at one path (a cache's version is its path)"
    assert not re.search(r"@[A-Z_]+@", text), "every placeholder filled in"
    (tmp_path / "b").mkdir()
    assert main(["init-ci", "--queue", "q:Q", "--dir", str(tmp_path / "b"), "--shards", "0"]) == 2
    assert not (tmp_path / "b" / ".github").exists()
