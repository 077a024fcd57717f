"""``--queue exec:COMMAND``: a queue in another process, spoken to over JSON lines (takeover._internal.bridge).

The adapters are real processes: tests/fixtures/adapters/pyadapter.py (the SQLite reference queue behind the
protocol, or one of its ways to break it) and, where node is installed, the JavaScript reference queue and
its planted bug (adapters/js). Each test asserts what a user would see: one line naming the adapter and the
line, the call that fails, a verdict, nothing left running.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import psutil
import pytest

from takeover._internal import bridge
from takeover._internal.run.supervision import send, wait_stopped
from takeover.contract import open_queue
from takeover.errors import ContractError
from tests.helpers.processes import REPO, child_env, takeover, wait_no_stragglers

ADAPTER = f"exec:{sys.executable} tests/fixtures/adapters/pyadapter.py"


def test_a_bad_first_line_stops_the_command_with_one_line(tmp_path):
    out = tmp_path / "run"
    result = takeover("stress", "--profile", "smoke", "--queue", f"{ADAPTER} garbage_hello", "--out", str(out))
    assert result.returncode == 2, result.stderr
    error = [line for line in result.stderr.splitlines() if line.startswith("takeover: error:")]
    assert len(error) == 1 and "pyadapter.py garbage_hello" in error[0] and "'hello there'" in error[0], result.stderr
    assert "Traceback" not in result.stderr and not out.exists()


def test_the_hello_is_checked(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    with pytest.raises(ContractError, match="version 0 of the protocol; this takeover speaks 1"):
        open_queue(f"{ADAPTER} old_version", str(tmp_path / "q.sqlite"))
    with pytest.raises(ContractError, match="takes only postgres databases"):
        open_queue(f"{ADAPTER} postgres_only", str(tmp_path / "q.sqlite"))
    with pytest.raises(ContractError, match='"library" must be an object with "name" and "version" strings'):
        open_queue(f"{ADAPTER} bad_library", str(tmp_path / "q.sqlite"))


def test_the_hello_names_the_library_for_the_bug_report(tmp_path, monkeypatch):
    """An adapter's library is named in its hello; the report (takeover._internal.replay.issue) reads it from the
    factory, once an adapter of that queue has been started in this process."""
    monkeypatch.chdir(REPO)
    spec = f"{ADAPTER} library"
    factory = bridge.ExecFactory(spec)
    assert factory.library is None  # not started yet: nothing said
    factory(str(tmp_path / "q.sqlite")).close()
    assert (factory.library, factory.library_version, factory.library_home) == (
        "pyqueue", "9.9.1", "https://example.org/pyqueue")
    assert factory.library_calls == {"claim": "queue.pop(lease={lease})"}
    assert factory.library_states == {"running": "popped"}
    assert bridge.ExecFactory(f"{ADAPTER} ok").library is None


@pytest.mark.parametrize(("mode", "error", "text"), [
    ("error_on_claim", bridge.AdapterError, "^RuntimeError: database is locked$"),
    ("wrong_id", bridge.AdapterBroken, r"answered request 2 \(claim\) with id \"one\""),
    ("not_json", bridge.AdapterBroken, r"a line that is not .*'claiming now\.\.\.'"),
    ("exit_on_claim", bridge.AdapterBroken, "exited with code 3"),
    # issue 34: each of these once hung, tracebacked or took ~20 s
    ("never_sent", bridge.AdapterBroken, r"request 2 \(claim\) with an answer to request 7, never sent"),
    ("twice", bridge.AdapterBroken, r"request 2 \(claim\) with an answer to request 1, answered already"),
    ("child_holds_stdout", bridge.AdapterBroken, r"request 2 \(claim\): exited with code 4"),
    ("rt_signal", bridge.AdapterBroken, r"request 2 \(claim\): exited with signal SIGRTMIN\+2"),
    ("big_line", bridge.AdapterBroken, r"request 2 \(claim\): printed a line longer than 1048576 bytes"),
    ("hang_on_claim", bridge.AdapterBroken, r"request 2 \(claim\): no answer within 1s"),
])
def test_a_call_that_breaks_the_protocol_fails(tmp_path, monkeypatch, mode, error, text):
    monkeypatch.chdir(REPO)
    # a short deadline for the adapter that hangs; the others answer at once, but a loaded machine may take more
    # than 1 s to pipe a 1 MiB line through (big_line once timed out at load 11)
    monkeypatch.setattr(bridge, "CALL_TIMEOUT", 1.0 if mode == "hang_on_claim" else 5.0)
    queue = open_queue(f"{ADAPTER} {mode}", str(tmp_path / "q.sqlite"))
    group = queue.proc.pid
    try:
        queue.register("t1", 1.0)
        started = time.monotonic()
        with pytest.raises(error, match=text) as caught:
            queue.claim("w1", 2.0, 1.0)
        assert time.monotonic() - started < 8, "a broken adapter is named at once (a hung one after its timeout)"
        assert len(str(caught.value)) < 600 and "\n" not in str(caught.value)
        if error is bridge.AdapterBroken:  # the adapter is done for: every later call says why at once
            with pytest.raises(bridge.AdapterBroken, match=text):
                queue.snapshot()
        else:
            assert queue.snapshot() == [("t1", "pending", 0, None)]
    finally:
        queue.close()
    assert not psutil.pid_exists(queue.proc.pid) or psutil.Process(queue.proc.pid).status() == psutil.STATUS_ZOMBIE
    assert _group(group) == [], "the adapter's process group (a child holding its stdout) is gone too"


def _group(pgid: int) -> list[int]:
    """The live processes of a process group (zombies are dead: their parent reaps them)."""
    found = []
    for p in psutil.process_iter(["pid", "status"]):
        try:
            if os.getpgid(p.pid) == pgid and p.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(p.pid)
        except (ProcessLookupError, PermissionError):
            pass
    return found


def test_an_answer_that_breaks_the_contract_goes_to_the_one_check_of_answers(tmp_path, monkeypatch):
    """The bridge decodes; takeover._internal.answers judges what was decoded, as for a Python queue: an extend answered
    with text is a malformed answer (answers_well_formed), not an adapter that broke the protocol."""
    from takeover._internal import answers

    monkeypatch.chdir(REPO)
    spec = f"{ADAPTER} bad_extend"
    queue = open_queue(spec, str(tmp_path / "q.sqlite"))
    try:
        queue.register("t1", 1.0)
        assert queue.claim("w1", 2.0, 1.0) == ("t1", 1, 3.0)
        with pytest.raises(answers.MalformedAnswer, match=r"extend\(\) returned 'soon'"):
            answers.extend(queue.extend("t1", 1, 2.5, 1.0), spec)
        assert queue.broken is None
    finally:
        queue.close()


def test_an_adapters_forked_children_end_with_it(tmp_path, monkeypatch):
    """issue 34: ``sleep 3000`` children an adapter forked outlived the run; closing the queue ends them."""
    monkeypatch.chdir(REPO)
    queue = open_queue(f"{ADAPTER} forks", str(tmp_path / "q.sqlite"))
    queue.register("t1", 1.0)
    assert queue.claim("w1", 2.0, 1.0) is not None
    kids = psutil.Process(queue.proc.pid).children(recursive=True)
    assert len(kids) == 2 and all(k.name() == "sleep" for k in kids)
    queue.close()
    psutil.wait_procs(kids, timeout=5)
    assert not any(k.is_running() and k.status() != psutil.STATUS_ZOMBIE for k in kids)


@pytest.mark.parametrize("mode", ["huge_error", "big_answer"])
def test_scenarios_quote_a_huge_answer_cut_short(mode):
    """issue 34: ``scenarios`` echoed a 50 MB answer ten times (524 MB on stdout)."""
    result = takeover("scenarios", "--queue", f"{ADAPTER} {mode}")
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stdout) < 60_000, len(result.stdout)
    assert "characters)" in result.stdout  # the cut says how long the answer was


def test_a_close_that_is_never_answered_stops_the_check_before_a_run(tmp_path):
    """issue 34: the check before a run waited forever for an adapter's answer to ``close``."""
    out = tmp_path / "run"
    started = time.monotonic()
    result = takeover("stress", "--profile", "smoke", "--queue", f"{ADAPTER} hang_on_close", "--out", str(out),
                      timeout=60)
    assert result.returncode == 2, result.stderr
    assert time.monotonic() - started < 30
    error = [line for line in result.stderr.splitlines() if line.startswith("takeover: error:")]
    assert len(error) == 1 and "request 1 (close): no answer within 5s" in error[0], result.stderr
    assert "Traceback" not in result.stderr and not out.exists()


OWNER = """
import sys, time
from takeover._internal import bridge
from takeover.contract import open_queue
bridge.share_group()
queue = open_queue(sys.argv[1], sys.argv[2])
print(queue.proc.pid, flush=True)
time.sleep(60)
"""


JS_SQLITE = [pytest.mark.needs_package("nodejs", "npm"), pytest.mark.needs_node_for("sqlite.js")]


# The JavaScript reference waits for a request in a blocking read(2), not node's event loop: frozen and
# killed all the same.
@pytest.mark.parametrize("adapter", [ADAPTER, pytest.param("exec:node adapters/js/reference.js", marks=JS_SQLITE)],
                         ids=["python", "node"])
def test_freezing_or_killing_a_worker_freezes_or_kills_its_adapter(tmp_path, adapter):
    owner = subprocess.Popen([sys.executable, "-c", OWNER, adapter, str(tmp_path / "q.sqlite")], cwd=REPO,
                             stdout=subprocess.PIPE, text=True, env=child_env())
    try:
        assert owner.stdout is not None
        adapter = psutil.Process(int(owner.stdout.readline()))
        send(owner.pid, 19)  # SIGSTOP, as the nemesis pauses a worker
        assert wait_stopped(owner.pid, 2.0) and wait_stopped(adapter.pid, 2.0)
        send(owner.pid, 18)  # SIGCONT
        deadline = time.monotonic() + 2
        while adapter.status() == psutil.STATUS_STOPPED and time.monotonic() < deadline:
            time.sleep(0.01)
        assert adapter.status() != psutil.STATUS_STOPPED
        send(owner.pid, 9)  # SIGKILL, as the nemesis kills one
        owner.wait(5)
        deadline = time.monotonic() + 5
        while adapter.is_running() and adapter.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not adapter.is_running() or adapter.status() == psutil.STATUS_ZOMBIE
    finally:
        owner.kill()
        owner.wait()


@pytest.mark.slow
def test_a_stress_run_through_the_bridge_is_valid_and_leaves_nothing(tmp_path):
    out = tmp_path / "run"
    # ``forks``: the adapter forks a ``sleep 3000`` at its start and at each claim (issue 34: they outlived the run)
    result = takeover("stress", "--profile", "smoke", "--queue", f"{ADAPTER} forks", "--duration", "1", "--tasks",
                      "30", "--out", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads((out / "summary.json").read_text())["valid"] is True
    assert f"cd {REPO} && takeover stress" in result.stdout  # the command is run from where it was given
    started = (out / "adapter.log").read_text().splitlines()
    # one adapter for each worker incarnation, the coordinator and the probe process
    assert len(started) >= 4 and all("pyadapter forks started on " in line for line in started)
    assert wait_no_stragglers(out) == []


@pytest.mark.slow
@pytest.mark.parametrize(("mode", "words"), [
    ("exit_on_claim", "(claim): exited with code 3"),
    # the bridge's tests above show each of these breaks named; a whole run of each is for the nightly tier
    pytest.param("hang_on_claim", "(claim): no answer within", marks=pytest.mark.nightly),
    pytest.param("wrong_id", 'with id "one"', marks=pytest.mark.nightly),
    pytest.param("rt_signal", "(claim): exited with signal SIGRTMIN+2", marks=pytest.mark.nightly),
])
def test_a_stress_run_whose_adapter_breaks_is_inconclusive_and_names_it(tmp_path, mode, words):
    """issue 34: an adapter that exits mid-run, answers with a wrong id or hangs gave INVALID with diagnoses of
    the queue's semantics (S1, S2) and "inconclusive: no queue operation completed" beside exit 1."""
    out = tmp_path / "run"
    result = takeover("stress", "--profile", "smoke", "--queue", f"{ADAPTER} {mode}", "--duration", "1",
                      "--tasks", "10", "--out", str(out), timeout=240)
    assert result.returncode == 3, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    said = [line for line in result.stdout.splitlines() if line.strip().startswith("inconclusive:")]
    assert len(said) == 1, result.stdout
    assert "the queue's adapter broke the protocol" in said[0] and "pyadapter.py" in said[0] and words in said[0]
    assert f"adapter.log ends: pyadapter {mode} started on" in said[0]
    assert "diagnosis" not in result.stdout and "(S1)" not in result.stdout and "(S2)" not in result.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["exit_code"] == 3 and summary["valid"] == "unknown" and words in summary["inconclusive"]
    assert "diagnosis" not in summary
    assert wait_no_stragglers(out) == []


@pytest.mark.slow
@pytest.mark.needs_package("nodejs", "npm", "postgresql")
@pytest.mark.needs_node_for("postgres.js")  # reference.js and planted.js load only the database's file
def test_the_javascript_reference_passes_and_its_planted_bug_departs(monkeypatch):
    import takeover
    from takeover._internal import db

    monkeypatch.chdir(REPO)
    with db.serve("postgres"):  # one private server for both
        reference = takeover.scenarios("exec:node adapters/js/reference.js", only=["S3"], db="postgres")
        planted = takeover.scenarios("exec:node adapters/js/planted.js", only=["S3"], db="postgres")
    assert reference.ok, reference.message()
    assert not planted.ok
    stale = [line for line in planted.failures if "S3 step 6" in line and "expected False, got True" in line]
    assert stale, planted.failures


@pytest.mark.slow
@pytest.mark.needs_package("nodejs", "npm", "redis-server")
@pytest.mark.needs_node_for("redis.js")
def test_the_javascript_reference_passes_on_redis_and_its_planted_bug_departs(monkeypatch):
    import takeover
    from takeover._internal import db

    monkeypatch.chdir(REPO)
    with db.serve("redis"):  # one private server for both
        reference = takeover.scenarios("exec:node adapters/js/reference.js", db="redis")
        planted = takeover.scenarios("exec:node adapters/js/planted.js", only=["S3"], db="redis")
    assert reference.ok, reference.message()
    assert not planted.ok
    stale = [line for line in planted.failures if "S3 step 6" in line and "expected False, got True" in line]
    assert stale, planted.failures


@pytest.mark.needs_package("nodejs", "npm")
@pytest.mark.needs_node_for("redis.js")
def test_the_javascript_redis_queue_runs_the_lua_scripts_of_the_python_reference():
    """The two Redis references differ in the language and the bridge only: the same scripts, word for word."""
    from takeover.queues.redis_lease import RedisLeaseQueue

    out = subprocess.run(["node", "-e", "console.log(JSON.stringify(require('./adapters/js/redis').SCRIPTS))"],
                         cwd=REPO, capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    scripts = json.loads(out.stdout)
    assert set(scripts) == {"REGISTER", "CLAIM", "FINISH", "EXTEND", "SNAPSHOT"}
    for name, lua in scripts.items():
        assert lua.split() == getattr(RedisLeaseQueue, name).split(), name


@pytest.mark.needs_package("nodejs", "npm")
@pytest.mark.needs_node_for("sqlite.js")
def test_the_javascript_reference_passes_on_sqlite_and_its_planted_bug_departs(monkeypatch):
    import takeover

    monkeypatch.chdir(REPO)
    reference = takeover.scenarios("exec:node adapters/js/reference.js", only=["S3"])
    planted = takeover.scenarios("exec:node adapters/js/planted.js", only=["S3"])
    assert reference.ok, reference.message()
    assert not planted.ok
    stale = [line for line in planted.failures if "S3 step 6" in line and "expected False, got True" in line]
    assert stale, planted.failures


@pytest.mark.nightly
@pytest.mark.slow
@pytest.mark.needs_package("nodejs", "npm")
@pytest.mark.needs_node_for("sqlite.js")
def test_a_stress_run_of_the_javascript_reference_on_sqlite_is_valid_and_leaves_nothing(tmp_path):
    out = tmp_path / "run"
    result = takeover("stress", "--profile", "smoke", "--queue", "exec:node adapters/js/reference.js",
                      "--duration", "3", "--seed", "1", "--out", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["valid"] is True and summary["counts"]["claims"]["ok"] > 0
    assert wait_no_stragglers(out) == []


@pytest.mark.nightly
@pytest.mark.slow
@pytest.mark.needs_package("nodejs", "npm", "redis-server")
@pytest.mark.needs_node_for("redis.js")
def test_a_stress_run_of_the_javascript_reference_on_redis_is_valid_and_leaves_nothing(tmp_path):
    out = tmp_path / "run"
    result = takeover("stress", "--db", "redis", "--profile", "smoke", "--queue", "exec:node adapters/js/reference.js",
                      "--duration", "3", "--seed", "1", "--conn-kill-rate", "0.2", "--out", str(out),
                      timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["valid"] is True and summary["counts"]["claims"]["ok"] > 0
    assert wait_no_stragglers(out) == []
