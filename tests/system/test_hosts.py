"""``--hosts``: workers on network namespaces of the run's own, and the network faults, on a real server.

One short run drives every network fault and the history must show that each one's window was reached
(a partitioned worker's call held up across the cut, a killed session's worker told so by the server, the
crash seen by the workers and the run VALID after the restart); one SIGKILL of takeover must leave no
namespace, holder, server or folder behind. Multi-seed figures are the bench's, not these tests'.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.helpers.processes import REPO, records
from tests.system.test_postgres import _env, servers_of

pytestmark = [pytest.mark.slow, pytest.mark.needs_package("postgresql", "iptables", "iproute2"),
              pytest.mark.skipif(os.geteuid() != 0, reason="--hosts needs root (network namespaces)")]


def _stress(out: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "takeover", "stress", "--db", "postgres", "--profile", "smoke", "--no-faults",
            "--workers", "4", "--tasks", "40", "--seed", "6", "--out", str(out), *args]


def _timed_out(error: str) -> bool:
    """A call or a connect that got no answer (a cut), not one the server ended (a kill, a crash)."""
    return any(w in error.lower() for w in ("timeout", "timed out", "could not receive"))


def _windows(hist: list[dict], kind: str) -> list[tuple[dict, dict]]:
    starts = [r for r in hist if r["f"] == kind and r["type"] == "invoke"]
    ends = [r for r in hist if r["f"] == kind and r["type"] != "invoke"]
    assert len(starts) == len(ends), f"every {kind} ends: {starts} {ends}"
    return list(zip(starts, ends, strict=True))


def test_each_network_fault_reaches_its_window_and_the_reference_queue_stays_valid(tmp_path: Path):
    out = tmp_path / "run"
    proc = subprocess.run(_stress(out, "--hosts", "2", "--duration", "8", "--partition-rate", "0.5",
                                  "--conn-kill-rate", "0.5", "--db-restart-rate", "0.25", "--net-delay", "0.02",
                                  "--net-loss", "0.01"),
                          cwd=REPO, env=_env(), capture_output=True, text=True, timeout=180)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    config = json.loads((out / "config.json").read_text())
    assert config["hosts"] == 2 and config["placement"] == {"w0": "h1", "w1": "h2", "w2": "h1", "w3": "h2"}
    hist = records(out)
    host_of = {r["target"]: r["host"] for r in hist if r["f"] == "spawn"}
    assert set(host_of.values()) == {"h1", "h2"}
    by_process: dict[int, list[dict]] = {}
    for r in hist:
        by_process.setdefault(r["process"], []).append(r)

    # A partition: a worker on a cut host was inside a queue call that the cut held up (calls take ms), or
    # failed to reach the database (a call or a reopen that timed out) before the cut healed.
    held = []
    shapes_held = set()
    for start, end in _windows(hist, "partition"):
        before = len(held)
        cut = set(start["host"].split(","))
        for process, ops in by_process.items():
            if host_of.get(process) not in cut:
                continue
            invokes = [r for r in ops if r["type"] == "invoke" and start["time"] <= r["time"] < end["time"]
                       and r["f"] in ("claim", "finish", "extend", "register")]
            for inv in invokes:
                done = next((r for r in ops if r["time"] > inv["time"] and r["f"] == inv["f"]), None)
                if done is not None and done["time"] - inv["time"] > 0.3:
                    held.append((inv["f"], round(done["time"] - inv["time"], 2)))
            held += [(r["f"], r["error"][:40]) for r in ops if r["type"] == "info" and r["f"] != "action"
                     and start["time"] < r["time"] <= end["time"] + 0.5 and _timed_out(r["error"])]
        if len(held) > before:
            shapes_held.add(start["detail"])
    assert held, "no queue call of a cut-off worker was held up or cut off by a partition"
    # Seed 6 draws a one-way cut first (its requests arrive, its replies are lost): reached as well.
    assert "one_way" in shapes_held, shapes_held

    # A connection kill: a session ended, and its worker heard of it from its next call.
    kills = [(s, e) for s, e in _windows(hist, "conn_kill") if e.get("value", "0") != "0"]
    assert kills, "no connection kill ended a session"
    told = [r for s, _ in kills for r in by_process.get(s["target"], [])
            if r["type"] == "info" and r["time"] > s["time"] and "terminat" in r.get("error", "")]
    assert told, "no killed worker was told by the server that its connection was terminated"

    # A restart: the workers lost their sessions, and the queue served again afterwards.
    (start, end), *_ = _windows(hist, "db_restart")
    assert end["type"] == "ok"
    lost = [r for r in hist if r["type"] == "info" and start["time"] <= r["time"] and r["process"] > 0]
    assert lost, "no worker saw the database go"
    assert any(r["f"] == "finish" and r["type"] == "ok" and r["time"] > end["time"] for r in hist)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["valid"] is True

    # The loss: its rules dropped packets while faults ran (TCP hid them from every call), and said so.
    loss = [r for r in hist if r["f"] == "net_loss"]
    assert [r["detail"] for r in loss] == ["0.01"] and int(loss[0]["value"]) > 0, loss
    assert summary["network"]["lost_packets"] == int(loss[0]["value"])

    # The delay: no claim came back sooner than a round trip through the proxy (0.02 s each way).
    took = []
    for process, ops in by_process.items():
        claims = [r for r in ops if r["f"] == "claim" and process > 0]
        took += [b["time"] - a["time"] for a, b in zip(claims, claims[1:], strict=False)
                 if a["type"] == "invoke" and b["type"] in ("ok", "fail")]
    assert took and min(took) >= 0.038, min(took)


def _netns(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return ""


def _net_namespaces() -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            found.setdefault(os.readlink(entry / "ns" / "net"), []).append(int(entry.name))
        except OSError:
            continue
    return found


def test_sigkill_of_takeover_leaves_no_namespace_server_or_folder(tmp_path: Path):
    out = tmp_path / "run"
    proc = subprocess.Popen(_stress(out, "--hosts", "2", "--duration", "60"), cwd=REPO, env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    ours = os.readlink("/proc/self/ns/net")
    spaces: set[str] = set()
    folders: set[Path] = set()
    try:
        # As soon as the run's network, its server and its first workers are up: the namespaces (held by three
        # of takeover's children, the workers among the others) and a server whose processes are inside one.
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                inside = [ns for c in psutil.Process(proc.pid).children(recursive=True)
                          if (ns := _netns(c.pid)) and ns != ours]
                spaces = set(inside)
                servers = [p for p in servers_of(proc.pid) if _netns(p.pid) in spaces and "-D" in p.cmdline()]
                if len(spaces) == 3 and len(inside) > 3 and servers:
                    folders = {Path(p.cmdline()[p.cmdline().index("-D") + 1]).parent for p in servers}
                    break
            except psutil.NoSuchProcess:  # a process ended between being listed and being read (a server's backend)
                pass
            time.sleep(0.05)
        assert len(spaces) == 3 and folders, f"the database's and two hosts' namespaces, and the server: {spaces}"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            left = {ns: pids for ns, pids in _net_namespaces().items() if ns in spaces}
            if not left and not servers_of(proc.pid) and not any(f.exists() for f in folders):
                break
            time.sleep(0.1)
        assert not left, f"processes still in the run's namespaces: {left}"
        assert servers_of(proc.pid) == [] and not any(f.exists() for f in folders)
    finally:
        if proc.poll() is None:
            proc.kill()
        for p in servers_of(proc.pid):
            p.kill()
