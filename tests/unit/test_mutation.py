"""``takeover mutate``: the generator's mutants of a tiny known module, the equivalence table's ids, a
generation-fence mutant killed by a real run of the scenarios, bad input, and (slow) one mutant killed
by a real stress run.

Why these: the mutation score is only honest if the mutant list is what the operators say it is (every
site, stable ids, each one compiling and different), if the reviewed table of equivalent mutants names
mutants that exist (it must not rot when the reference queues change), and if a mutant that breaks a
promise is actually killed by the stages that run it.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from unittest.mock import ANY

import pytest

from takeover.cli import main
from takeover.contract import POSTGRES_REFERENCE_QUEUE, REDIS_REFERENCE_QUEUE, REFERENCE_QUEUE
from takeover.mutation.equivalent import EQUIVALENT
from takeover.mutation.generate import generate

TINY = '''"""A tiny queue module."""

from takeover._internal.sqlite_util import write_transaction

_FINISH = "UPDATE tasks SET state = ? WHERE task_id = ? AND generation = ? AND ? < lease_until"


class Tiny:
    """Only finish."""

    def finish(self, task_id: str) -> bool:
        with write_transaction(self.conn) as conn:
            return conn.execute(_FINISH, (task_id,)).rowcount == 1


class Other:
    def finish(self) -> bool:
        return 1 < 2
'''

TINY_IDS = [
    "tinyq:FINISH:drop-conjunct-1",  # task_id = ?
    "tinyq:FINISH:drop-conjunct-2",  # generation = ?
    "tinyq:FINISH:drop-conjunct-3",  # ? < lease_until
    "tinyq:FINISH:relational-1",  # < -> <=
    "tinyq:Tiny.finish:early-return-1",  # before the with
    "tinyq:Tiny.finish:no-transaction-1",
    "tinyq:Tiny.finish:begin-deferred-1",
    "tinyq:Tiny.finish:early-return-2",  # before the return in the with
    "tinyq:Tiny.finish:relational-1",  # == -> !=
    "tinyq:Tiny.finish:constant-1",  # 1 -> 0
    "tinyq:Tiny.finish:constant-2",  # 1 -> 2
]


def test_the_tiny_module_gives_exactly_its_mutants_each_compiling_and_different() -> None:
    mutants = generate("tinyq:Tiny", TINY)
    assert [m.id for m in mutants] == TINY_IDS  # the docstrings, the imports and class Other are never mutated
    original = ast.unparse(ast.parse(TINY))
    for m in mutants:
        compile(m.source, m.id, "exec")
        assert m.source != original, m.id
        assert m.diff, m.id
    assert len({m.source for m in mutants}) == len(mutants)
    fence = next(m for m in mutants if m.id == "tinyq:FINISH:drop-conjunct-2")
    assert "(generation = ? OR 1=1)" in fence.source
    assert generate("tinyq:Tiny", TINY) == mutants  # deterministic


@pytest.mark.parametrize("queue", [REFERENCE_QUEUE, POSTGRES_REFERENCE_QUEUE, REDIS_REFERENCE_QUEUE])
def test_every_equivalent_mutant_in_the_table_exists_and_has_a_reason(queue: str) -> None:
    ids = {m.id for m in generate(queue)}
    prefix = queue.partition(":")[0].rpartition(".")[2] + ":"
    listed = {k for k in EQUIVALENT if k.startswith(prefix)}
    assert listed <= ids, sorted(listed - ids)
    assert all(len(EQUIVALENT[k].split()) >= 4 for k in listed)


def _run(tmp_path: Path, *args: str) -> tuple[int, dict]:
    out = tmp_path / "mutate"
    code = main(["mutate", *args, "--out", str(out)])
    return code, json.loads((out / "mutate.json").read_text())


def test_a_mutant_that_drops_the_generation_fence_of_finish_is_killed(tmp_path: Path) -> None:
    code, doc = _run(tmp_path, "--only", "sqlite_lease:FINISH:drop-conjunct-2", "--stages", "scenarios",
                     "--min-score", "100")
    assert code == 0
    [m] = doc["mutants"]
    assert (m["verdict"], m["stage"]) == ("killed", "scenarios")
    assert "generation = ?" in m["diff"] and m["time_to_kill_s"] is not None
    assert doc["figures"]["score"] == 1.0


def test_explore_in_mutate_is_budgeted_by_examples_the_same_on_every_run(tmp_path: Path) -> None:
    """A kill by explore comes at the same example on every run (a budget in seconds made it come or not
    with the machine's load); a mutant explore cannot tell apart gets the whole budget, no more."""
    mid = "sqlite_lease:EXTEND:drop-conjunct-1"  # a heartbeat that moves the lease of every task of that generation
    kills = []
    for run in ("a", "b"):
        code, doc = _run(tmp_path / run, "--only", mid, "--stages", "explore", "--explore-examples", "30")
        [m] = doc["mutants"]
        assert (m["verdict"], m["stage"]) == ("killed", "explore") and doc["explore_examples"] == 30
        kills.append(m["stages"]["explore"]["examples_to_kill"])
    assert kills[0] == kills[1] and kills[0] > 1
    # A close that returns at once (listed as equivalent): no call the contract makes can tell.
    _, doc = _run(tmp_path / "c", "--only", "sqlite_lease:SQLiteLeaseQueue.close:early-return-1",
                  "--stages", "explore", "--explore-examples", "7")
    [m] = doc["mutants"]
    assert m["verdict"] == "equivalent" and m["stages"]["explore"] == {"examples": 7, "wall_s": ANY, "killed": False}


def test_a_survivor_below_the_min_score_exits_1(tmp_path: Path) -> None:
    # A claim whose pick and take autocommit apart: the scenarios, one call after another, cannot tell.
    code, doc = _run(tmp_path, "--only", "sqlite_lease:SQLiteLeaseQueue.claim:no-transaction-1", "--stages",
                     "scenarios", "--min-score", "50")
    assert code == 1
    assert doc["figures"]["survivors"] == ["sqlite_lease:SQLiteLeaseQueue.claim:no-transaction-1"]


def test_resume_keeps_a_killed_mutant_and_refuses_another_queues_file(tmp_path: Path) -> None:
    mid = "sqlite_lease:FINISH:drop-conjunct-2"
    prior = {"queue": REFERENCE_QUEUE, "seed": 1, "stress_seconds": 20.0, "mutants": [
        {"id": mid, "verdict": "killed", "stage": "stress", "time_to_kill_s": 1.5, "detail": "violated: x (1)",
         "stages": {"scenarios": {"wall_s": 0.1, "killed": False}, "stress": {"wall_s": 30.0, "killed": True}}}]}
    old = tmp_path / "old.json"
    old.write_text(json.dumps(prior))
    code, doc = _run(tmp_path, "--only", mid, "--stages", "scenarios", "--resume", str(old))
    [m] = doc["mutants"]
    assert code == 0 and (m["stage"], m["time_to_kill_s"], m["detail"]) == ("stress", 1.5, "violated: x (1)")
    old.write_text(json.dumps({**prior, "seed": 2}))
    assert main(["mutate", "--only", mid, "--resume", str(old), "--out", str(tmp_path / "m2")]) == 2


@pytest.mark.parametrize("args, words", [
    (["--queue", "nocolon"], "MODULE:ATTR"),
    (["--queue", "takeover.queues.sqlite_lease:Nope"], "no top-level class"),
    (["--queue", "no_such_module_here:Q"], "cannot find"),
    (["--stages", "scenarios,bogus"], "--stages"),
    (["--min-score", "150"], "--min-score"),
    (["--mutants", "0"], "--mutants"),
    (["--stress-seconds", "-1"], "--stress-seconds"),
    (["--explore-examples", "0"], "--explore-examples"),
    (["--only", "nothing:matches:this"], "matches no mutant"),
])  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(args: list[str], words: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mutate", *args, "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0], err
    assert not (tmp_path / "m").exists()


@pytest.mark.nightly
@pytest.mark.slow
def test_a_claim_that_takes_every_row_is_killed_by_a_real_stress_run(tmp_path: Path) -> None:
    # One process replaying the scenarios has one task, so this mutant looks right to them; real workers
    # claiming among many tasks take finished ones back.
    code, doc = _run(tmp_path, "--only", "sqlite_lease:TAKE:drop-conjunct-1", "--stages", "stress",
                     "--stress-seconds", "3")
    assert code == 0
    [m] = doc["mutants"]
    assert (m["verdict"], m["stage"]) == ("killed", "stress"), m
    assert m["detail"].startswith("violated: ")
    assert doc["reference"]["verdict"] == "VALID"  # the queue as it is passes the same run: no false alarm
    assert not list((tmp_path / "mutate" / "runs").glob("*"))  # a killed mutant's run folder is not kept


def test_rejudge_follows_the_table_as_it_is_now() -> None:
    from takeover.mutation.report import rejudge

    def row(mid: str, verdict: str) -> dict:
        return {"id": mid, "site": "S", "operator": "op", "what": "w", "line": 1, "diff": "-a\n+b", "verdict": verdict,
                "stage": "scenarios" if verdict == "killed" else None, "time_to_kill_s": 0.5 if verdict == "killed"
                else None, "detail": "", "stages": {}}

    doc = {"queue": "m:Q", "mutants": [row("m:S:op-1", "survived"), row("m:S:op-2", "equivalent"),
                                       row("m:S:op-3", "killed")]}
    out = rejudge(doc, {"m:S:op-1": "a reason in words", "m:S:op-3": "wrong entry here"})
    assert [m["verdict"] for m in out["mutants"]] == ["equivalent", "survived", "killed"]
    assert out["figures"]["score"] == 0.5 and out["figures"]["equivalence_table_wrong"] == ["m:S:op-3"]


def test_logic_and_concurrency_mutants_are_told_apart_by_operator_not_by_the_stage_that_killed_them() -> None:
    from takeover.mutation.report import figures
    from takeover.mutation.runner import Outcome

    def outcome(operator: str, stage: str | None, explore_killed: bool) -> Outcome:
        m = generate("tinyq:Tiny", TINY)[0]
        mutant = type(m)(f"tinyq:X:{operator}-1", m.module, m.attr, "X", operator, "", 1, "", "")
        return Outcome(mutant, verdict="killed" if stage else "survived", stage=stage,
                       stages={"explore": {"killed": explore_killed}})

    f = figures([outcome("relational", "scenarios", True), outcome("early-return", "stress", False),
                 outcome("begin-deferred", "explore", True), outcome("no-transaction", None, False)])
    assert (f["logic_mutants"], f["logic_killed_by_explore"]) == (2, 1)
    assert f["logic_missed_by_explore"] == ["tinyq:X:early-return-1"]  # killed, but by stress: not explore's
    assert (f["concurrency_mutants"], f["concurrency_killed_by_explore"]) == (2, 1)
    assert f["concurrency_missed_by_explore"] == ["tinyq:X:no-transaction-1"]


def test_list_finds_a_queue_module_in_the_current_folder_as_stress_does(tmp_path, monkeypatch, capsys):
    """issue 34: ``mutate --queue advq:Q --list`` could not find a module in the current folder that ``stress``
    finds (python -m's rule: the current folder first, takeover._internal.locate)."""
    import shutil
    import sys

    from takeover.queues import sqlite_lease

    shutil.copy(sqlite_lease.__file__, tmp_path / "advq_here.py")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    assert main(["mutate", "--queue", "advq_here:SQLiteLeaseQueue", "--list"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[0].startswith("advq_here:") and "mutants of advq_here:SQLiteLeaseQueue" in err
