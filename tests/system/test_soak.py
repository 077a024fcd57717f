"""``takeover soak`` on real processes: checkpoints, resource samples, interruption, the seed bank, CI.

Short soaks (seconds, checkpoints every few seconds) on the ``smoke`` profile. Assertions are on
what the soak left behind (soak.json, the segment folders, resources.csv, junit.xml), never on
timing; each test reaps whatever a run could have left.
"""

from __future__ import annotations

import csv
import json
import signal
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.helpers.processes import reap_stragglers, start_takeover, stop_and_reap, takeover, wait_no_stragglers

PLANTED = "takeover.queues.planted:StealsLiveLeases"  # lease_exclusive breaks within seconds under load


def _soak_json(root: Path) -> dict:
    return json.loads((root / "soak.json").read_text())


def _segments(root: Path) -> list[Path]:
    """The soak's segment and replay folders (none when the soak never made its folder)."""
    if not root.exists():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith(("seg-", "replay-")))


def _start_short_soak(root: Path, bank: Path):
    """Two minutes of 3-second segments on the smoke profile, no replays: checkpoints come fast. 40
    tasks rather than smoke's 120: the faulted phase uses a dozen or two, and the rest would only
    lengthen each segment's drain."""
    return start_takeover("soak", "--minutes", "2", "--checkpoint", "3", "--sample", "0.5", "--profile", "smoke",
                          "--tasks", "40", "--no-replay", "--out", str(root), "--seed-bank", str(bank))  # fmt: skip


def _wait_while_running(proc, ready, timeout: float = 110.0) -> None:
    """Poll ``ready()`` until it holds; the soak must not end meanwhile (its output then says why)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not ready():
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)


@pytest.mark.nightly
@pytest.mark.slow
@pytest.mark.timeout(150)
def test_soak_checkpoints_resources_and_interruption(tmp_path):
    """Checkpoints are written while the soak runs; SIGTERM still leaves a final verdict."""
    root = tmp_path / "soak"
    proc = _start_short_soak(root, tmp_path / "bank.json")
    try:
        _wait_while_running(proc, lambda: (root / "soak.json").exists() and len(_soak_json(root)["segments"]) >= 2)
        interim = _soak_json(root)
        assert interim["status"] == "running"
        assert len(interim["segments"]) >= 2, "two checkpoints were written while the soak ran"
        # SIGTERM while the next segment runs (its faulted phase has started): a signal between two
        # segments stops the soak before the next one, with no segment to interrupt.
        running = root / f"seg-{len(interim['segments']) + 1:04d}" / "history.jsonl"
        _wait_while_running(proc, lambda: running.exists() and '"start"' in running.read_text())
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        stop_and_reap(proc, *_segments(root))
    assert proc.returncode == 130, err
    first = json.loads((root / "seg-0001" / "config.json").read_text())["command"]
    assert f"seg-0001 runs: {first} (then seed +1 per segment)" in out.splitlines()
    soak = _soak_json(root)
    assert soak["status"] == "interrupted"
    assert soak["verdict"] == "valid", soak["segments"]
    segs = soak["segments"]
    assert len(segs) >= 2
    assert segs[-1]["interrupted"] is True, "the segment running at SIGTERM was stopped and checked"
    for seg in segs:
        folder = Path(seg["run_dir"])
        assert (folder / "summary.json").exists() and (folder / "config.json").exists()
        assert seg["registered"] > 0
    for seg in segs[:-1]:
        assert seg["verdict"] == "valid" and seg["finished"] > 0
        assert not (Path(seg["run_dir"]) / "history.jsonl").exists(), "a passed checkpoint's history is retired"
        assert not (Path(seg["run_dir"]) / "queue.sqlite").exists()
    assert soak["totals"]["finished"] == sum(s["finished"] for s in segs)
    assert sum(s["faults"]["kills"] for s in segs) > 0, "faults were injected"

    with (root / "resources.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) >= 10
    assert all(float(r["coordinator_rss_mb"]) > 0 for r in rows)
    assert any(int(r["workers"]) >= 2 and float(r["workers_rss_mb"]) > 0 for r in rows), "workers were sampled"
    assert any(float(r["service_rss_mb"]) > 0 for r in rows), "the service was sampled"
    assert any(float(r["history_mb"]) > 0 and float(r["queue_mb"]) > 0 for r in rows), "files were sampled"
    assert {r["segment"] for r in rows} >= {"seg-0001", "seg-0002"}
    assert soak["resources"]["samples"] == len(rows)

    suite = ET.parse(root / "junit.xml").getroot()
    names = [c.get("name") for c in suite.iter("testcase")]
    assert "seg-0001 seed 1" in names and "resources bounded" in names
    assert suite.get("failures") == "0"
    assert "data:image/png;base64," in (root / "report.html").read_text()
    assert (root / "resources.png").stat().st_size > 1000
    for seg in _segments(root):
        assert wait_no_stragglers(seg) == []


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_sigkill_leaves_the_verdict_junit_and_no_process(tmp_path):
    """A CI timeout may SIGKILL the soak: what was checked is still published, nothing is left running."""
    root = tmp_path / "soak"
    proc = _start_short_soak(root, tmp_path / "bank.json")
    try:
        _wait_while_running(proc, lambda: (root / "soak.json").exists() and len(_soak_json(root)["segments"]) >= 1
                            and (root / "seg-0002").is_dir())  # fmt: skip
        proc.kill()  # SIGKILL: no handler, no final report
        proc.communicate(timeout=30)
        for seg in _segments(root):
            assert wait_no_stragglers(seg) == [], f"{seg.name}: processes left after SIGKILL"
    finally:
        stop_and_reap(proc, *_segments(root))
    soak = _soak_json(root)
    assert soak["status"] == "running" and soak["pid"] == proc.pid
    assert soak["verdict"] == "valid" and len(soak["segments"]) >= 1
    suite = ET.parse(root / "junit.xml").getroot()
    names = [c.get("name") for c in suite.iter("testcase")]
    assert [f"{s['name']} seed {s['seed']}" for s in soak["segments"]] == names[:-1]
    assert "as of the last checkpoint" in (root / "report.md").read_text()


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_ctrl_c_twice_at_the_checkpoint_keeps_the_segment_on_record(tmp_path):
    """Two Ctrl-C at a checkpoint: no traceback, the segment that ran is on record, reports written.

    Before, the second one raised wherever the soak was (even inside the checker's first import), so
    the segment vanished from soak.json and a half-imported matplotlib broke every report. Whether
    the signals land inside the check or just after it, the outcome below must hold.
    """
    root = tmp_path / "soak"
    proc = _start_short_soak(root, tmp_path / "bank.json")
    try:
        for line in proc.stderr:  # plain lines (not a terminal); "checking" is printed at once
            if "seg-0001 checking" in line:
                break
        proc.send_signal(signal.SIGINT)
        time.sleep(0.3)  # two signals sent at once are merged into one by the kernel
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=90)
    finally:
        stop_and_reap(proc, *_segments(root))
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "could not write" not in err, err
    soak = _soak_json(root)
    assert soak["status"] == "interrupted"
    assert [s["name"] for s in soak["segments"]] == ["seg-0001"]
    assert soak["segments"][0]["verdict"] in ("valid", "inconclusive")
    names = [c.get("name") for c in ET.parse(root / "junit.xml").getroot().iter("testcase")]
    assert names == ["seg-0001 seed 1", "resources bounded"]
    assert (root / "report.html").exists() and (root / "resources.png").exists()
    assert wait_no_stragglers(root / "seg-0001") == []


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_the_printed_line_is_the_segment_that_ran(tmp_path):
    """``--minutes 0.05`` under the default 300 s checkpoint: one 3 s segment, and the header's line is its own."""
    root = tmp_path / "soak"
    try:
        proc = takeover("soak", "--minutes", "0.05", "--sample", "1", "--profile", "smoke", "--tasks", "40",
                        "--no-replay", "--out", str(root), "--seed-bank", str(tmp_path / "bank.json"),
                        timeout=120)  # fmt: skip
    finally:
        for seg in _segments(root):
            reap_stragglers(seg)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"takeover soak: 0.05 min in one segment of 3 s, checked as it ends; folder {root}"
    ran = json.loads((root / "seg-0001" / "config.json").read_text())
    assert lines[1] == f"seg-0001 runs: {ran['command']}"
    assert ran["duration"] == 3.0 and [s["name"] for s in _soak_json(root)["segments"]] == ["seg-0001"]


@pytest.mark.nightly
@pytest.mark.slow
@pytest.mark.timeout(150)
def test_violation_is_banked_then_replayed(tmp_path):
    bank = tmp_path / "bank.json"
    first = tmp_path / "first"
    try:
        proc = takeover("soak", "--minutes", "0.07", "--checkpoint", "4", "--sample", "1", "--profile", "smoke",
                        "--queue", PLANTED, "--out", str(first), "--seed-bank", str(bank), timeout=120)
    finally:
        for seg in _segments(first):
            reap_stragglers(seg)
    assert proc.returncode == 1, proc.stderr
    soak = _soak_json(first)
    seg = soak["segments"][0]
    assert seg["verdict"] == "invalid" and "lease_exclusive" in seg["violations"]
    assert (Path(seg["run_dir"]) / "history.jsonl").exists(), "a failed checkpoint keeps its evidence"
    entries = json.loads(bank.read_text())["entries"]
    assert len(entries) == 1
    assert entries[0]["seed"] == seg["seed"] and entries[0]["config"]["queue"] == PLANTED
    # What the run found out about the queue is in its config.json, not in the bank's key or entry.
    assert "queue_capabilities" in json.loads((Path(seg["run_dir"]) / "config.json").read_text())
    assert "queue_capabilities" not in entries[0]["config"]
    assert "banked seed" in proc.stdout

    # A soak of another queue (the reference queue) does not replay the planted queue's seed: its
    # verdict is about its own queue. It says so, and with nothing else to run, nothing was tested.
    other = tmp_path / "other"
    proc = takeover("soak", "--minutes", "0", "--sample", "1", "--out", str(other), "--seed-bank", str(bank),
                    timeout=120)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    soak = _soak_json(other)
    assert soak["replays"] == [] and [e["queue"] for e in soak["skipped_replays"]] == [PLANTED]
    assert "of other queues not replayed" in proc.stdout

    replay = tmp_path / "replay"
    try:
        proc = takeover("soak", "--minutes", "0", "--sample", "1", "--out", str(replay), "--seed-bank", str(bank),
                        "--queue", PLANTED, timeout=120)
    finally:
        for seg in _segments(replay):
            reap_stragglers(seg)
    assert proc.returncode == 1, proc.stderr
    soak = _soak_json(replay)
    assert soak["segments"] == []
    assert [r["name"] for r in soak["replays"]] == ["replay-01"]
    rep = soak["replays"][0]
    assert rep["seed"] == entries[0]["seed"] and rep["queue"] == PLANTED
    assert rep["verdict"] == "invalid", "the banked bug fires again on replay"
    assert json.loads((replay / "replay-01" / "config.json").read_text())["queue"] == PLANTED
    assert len(json.loads(bank.read_text())["entries"]) == 1, "a replay does not bank its seed twice"
    suite = ET.parse(replay / "junit.xml").getroot()
    failed = [c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None]
    assert failed == [f"replay-01 seed {rep['seed']}"]


@pytest.mark.parametrize("args, env, words", [
    (["--minutes", "-1"], {}, "--minutes"),
    (["--checkpoint", "0", "--minutes", "1"], {}, "--checkpoint"),
    (["--checkpoint", "0.5", "--minutes", "1"], {}, "--checkpoint"),
    (["--minutes", "0.001"], {}, "shorter than one segment"),
    ([], {"SOAK_MINUTES": "an hour"}, "SOAK_MINUTES"),
    (["--duration", "5"], {}, "--checkpoint"),
])  # fmt: skip
def test_bad_input_is_one_line_exit_2(tmp_path, monkeypatch, args, env, words):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    proc = takeover("soak", *args, "--out", str(tmp_path / "x"), "--seed-bank", str(tmp_path / "bank.json"))
    assert proc.returncode == 2
    assert words in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "x").exists(), "nothing is created for bad input"


def test_broken_seed_bank_is_bad_input(tmp_path):
    bank = tmp_path / "bank.json"
    bank.write_text('{"entries": [{"config": {"workers": 0}}]}')
    proc = takeover("soak", "--minutes", "1", "--out", str(tmp_path / "x"), "--seed-bank", str(bank))
    assert proc.returncode == 2 and "seed bank" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("make_bank", ["garbage", "folder", "unreachable"])
def test_unusable_seed_bank_is_refused_before_anything_runs(tmp_path, make_bank):
    """A bank that cannot be read or written would lose the night's found seed hours later."""
    bank = tmp_path / "bank.json"
    if make_bank == "garbage":
        bank.write_text("{not json")
    elif make_bank == "folder":
        bank.mkdir()
    else:
        (tmp_path / "file").write_text("")
        bank = tmp_path / "file" / "bank.json"  # its folder is a file: it can never be created
    for extra in ([], ["--no-replay"]):
        proc = takeover("soak", "--minutes", "1", *extra, "--out", str(tmp_path / "x"), "--seed-bank", str(bank))
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "seed bank" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
        assert "Traceback" not in proc.stderr and not (tmp_path / "x").exists()


def test_the_seed_bank_defaults_to_the_output_folder_never_the_package(tmp_path, monkeypatch):
    """Without --seed-bank or $TAKEOVER_SEED_BANK the bank is seed-bank.json beside the soak folder: a user's
    failures are banked with their runs, and the installed package is never written."""
    from takeover._internal.soak.seedbank import DEFAULT_BANK

    monkeypatch.delenv("TAKEOVER_SEED_BANK", raising=False)
    before = DEFAULT_BANK.read_bytes()
    root = tmp_path / "nightly" / "soak"
    proc = takeover("soak", "--minutes", "0", "--sample", "1", "--out", str(root), timeout=120)
    assert proc.returncode == 3, proc.stdout + proc.stderr  # nothing banked, so nothing was tested
    assert _soak_json(root)["seed_bank"] == str(tmp_path / "nightly" / "seed-bank.json")
    assert DEFAULT_BANK.read_bytes() == before
