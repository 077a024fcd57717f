"""The soak's parts that need no soak: the resource-trend warning, the header it prints, and the
nightly CI workflow."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml

from takeover._internal.commands.soak import header
from takeover._internal.config import load_profile
from takeover._internal.soak.resources import growth_warnings

REPO = Path(__file__).resolve().parents[2]


def _rows(values: list[float], runs: int = 4) -> list[dict]:
    per = len(values) // runs
    return [{"elapsed": float(i), "segment": f"seg-{1 + min(i // per, runs - 1):04d}", "workers": 1.0,
             **{c: 10.0 for c in ("coordinator_fds", "workers_rss_mb", "workers_fds", "service_rss_mb",
                                  "service_fds", "soak_dir_mb", "queue_mb", "wal_mb", "ledger_mb", "history_mb")},
             "coordinator_rss_mb": v} for i, v in enumerate(values)]  # fmt: skip


def test_trend_warns_on_steady_growth_only():
    leak = [100.0 + 2.0 * i for i in range(40)]  # +2 MB per sample, steadily
    assert any(w.startswith("coordinator_rss_mb") for w in growth_warnings(_rows(leak)))
    flat = [100.0 + (3.0 if i % 2 else -3.0) for i in range(40)]  # noise around a level
    assert growth_warnings(_rows(flat)) == []
    warmup = [30.0] * 5 + [230.0] * 35  # the checker's one-time import in the first run
    assert growth_warnings(_rows(warmup)) == []


def test_nightly_workflow_runs_make_soak_and_publishes_even_on_failure():
    doc = yaml.safe_load((REPO / ".github" / "workflows" / "nightly-soak.yml").read_text())
    on = doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on` key as true
    assert on["schedule"][0]["cron"].split()[0].isdigit()
    steps = doc["jobs"]["soak"]["steps"]
    uses = [s.get("uses", "") for s in steps]
    assert any(u.startswith("actions/checkout@") for u in uses)
    soak = [s for s in steps if "make soak" in s.get("run", "")]
    assert len(soak) == 1
    junit = [s for s in steps if "junit" in s.get("uses", "")]
    assert junit and "junit.xml" in junit[0]["with"]["report_paths"] and junit[0]["if"] == "always()"
    upload = [s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert upload and upload[0]["if"] == "always()" and "steps.folder.outputs.dir" in upload[0]["with"]["path"]
    assert steps.index(soak[0]) < steps.index(upload[0])


def test_the_header_says_how_long_the_segments_really_run():
    """The first segment gets the shorter of --checkpoint and --minutes, and its line says so."""
    base = dataclasses.replace(load_profile("smoke").validate(), arrival_rate=10.0)
    root = Path("runs/x")
    one = header(base, 1, 300, root)
    assert one == ["takeover soak: 1 min in one segment of 60 s, checked as it ends; folder runs/x",
                   f"seg-0001 runs: {dataclasses.replace(base, duration=60.0).command()}"]  # fmt: skip
    assert " --duration 60 " in one[1]
    many = header(base, 60, 300, root)
    assert many[0] == ("takeover soak: 60 min in segments of 300 s back to back, each checked as it ends (the last "
                       "gets what is left); folder runs/x")  # fmt: skip
    assert many[1] == f"seg-0001 runs: {dataclasses.replace(base, duration=300.0).command()} (then seed +1 per segment)"
    assert header(base, 0, 300, root) == ["takeover soak: the banked seeds only (--minutes 0), folder runs/x"]


def test_the_bank_is_given_or_beside_the_soak_folder(monkeypatch):
    from takeover._internal.soak.seedbank import BANK_ENV, DEFAULT_BANK, bank_path

    monkeypatch.delenv(BANK_ENV, raising=False)
    assert bank_path(None) == Path("runs/seed-bank.json")
    assert bank_path(None, "ci/nightly/soak-7") == Path("ci/nightly/seed-bank.json")
    assert bank_path("mine.json", "ci/soak") == Path("mine.json")
    monkeypatch.setenv(BANK_ENV, "/cache/bank.json")
    assert bank_path(None, "ci/soak") == Path("/cache/bank.json")
    assert bank_path("mine.json") == Path("mine.json")
    assert DEFAULT_BANK not in (bank_path(None), bank_path(None, "x/y"))
