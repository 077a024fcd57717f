"""A soak's own reports, next to ``soak.json``: report.md, report.html (with the resource figure), junit.xml.

Why one JUnit test case per checkpoint and per replayed seed: CI lists each, so a red night says
which segment (and which seed, with the command that reproduces it) failed, and a banked seed that
still fails shows up under its own name every night until it is fixed.
"""

from __future__ import annotations

import base64
import html
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from takeover._internal.store import (
    JUNIT_XML,
    REPORT_FILES,
    REPORT_HTML,
    REPORT_MD,
    RESOURCES_FILE,
    RESOURCES_PNG,
    SOAK_FILE,
)
from takeover.reports.resources import figure


def write(root: Path, soak: dict[str, Any], resources: list[dict[str, float | str]]) -> list[str]:
    """The final reports; ``resources`` are the soak's resource samples (takeover._internal.soak.resources reads
    them: the soak hands them over, so the reports do not reach back into it)."""
    png = figure(resources)
    if png:
        (root / RESOURCES_PNG).write_bytes(png)
    (root / REPORT_MD).write_text(markdown(soak))
    (root / REPORT_HTML).write_text(render_html(soak, png))
    (root / JUNIT_XML).write_bytes(junit(soak))
    return [*REPORT_FILES] + ([RESOURCES_PNG] if png else [])


def write_interim(root: Path, soak: dict[str, Any]) -> list[str]:
    """report.md and junit.xml as of the last checkpoint, atomically, without the figure.

    Why at every checkpoint: a soak SIGKILLed by a CI timeout never reaches its final report, yet
    the night's JUnit check and Markdown verdict must still show every checkpoint done so far.
    The figure (matplotlib) is drawn once, at the end.
    """
    for name, data in ((REPORT_MD, markdown(soak).encode()), (JUNIT_XML, junit(soak))):
        tmp = root / f".{name}.tmp"
        tmp.write_bytes(data)
        tmp.replace(root / name)
    return [REPORT_MD, JUNIT_XML]


def _runs(soak: dict[str, Any]) -> list[dict[str, Any]]:
    return soak["replays"] + soak["segments"]


def _violations(seg: dict[str, Any]) -> str:
    return ", ".join(f"{k} {n}" for k, n in seg["violations"].items()) or "none"


def markdown(soak: dict[str, Any]) -> str:
    t = soak["totals"]
    status = soak["status"]
    if status == "running":  # written at a checkpoint: the soak went on, or was killed after it
        status = f"as of the last checkpoint; running, or killed if pid {soak.get('pid', '?')} is gone"
    lines = [f"# takeover soak: {soak['verdict'].upper()} ({status})", "",
             f"`{soak['command']}`", "",
             f"{t['segments']} checkpoints and {t['replays']} replayed seeds in {soak['elapsed']:.0f} s; "
             f"{t['finished']} finishes accepted; faults: {t['kills']} kills, {t['pauses']} pauses, "
             f"{t['lost_replies']} lost replies, {t['slow']} slow tasks; {t['duplicate_tasks']} task(s) with "
             f"duplicate side effects; {t['violations']} violations in {t['invalid']} run(s).", "",
             "| run | seed | verdict | finishes accepted / tasks | duplicates | violations | command |",
             "|---|---|---|---|---|---|---|"]
    for s in _runs(soak):
        lines.append(f"| {s['name']} | {s['seed']} | {s['verdict']} | {s['finished']}/{s['registered']} | "
                     f"{s['duplicate_tasks']} | {_violations(s)} | `{s['command']}` |")
    res = soak["resources"]
    lines += ["", f"## Resources ({res['samples']} samples, `{RESOURCES_FILE}`, `{RESOURCES_PNG}`)", ""]
    lines += [f"- warning: {w}" for w in res["warnings"]] or ["- nothing grew without bound"]
    if res["peak"]:
        lines += ["", "| series | peak | last |", "|---|---|---|"]
        lines += [f"| {k} | {v:g} | {res['last'].get(k, 0):g} |" for k, v in res["peak"].items()]
    for b in soak["banked"]:
        lines.append(f"\nBanked: seed {b['seed']} of {b['segment']} in `{b['bank']}`")
    for e in soak.get("skipped_replays") or []:
        lines.append(f"\nNot replayed (banked for another queue): seed {e['seed']} of `{e['queue']}`")
    return "\n".join(lines) + "\n"


CSS = ("body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px}h1{padding:.4em .6em;color:#fff;"
       "border-radius:6px}.valid{background:#2a9d8f}.invalid{background:#d62828}.inconclusive{background:#6c757d}"
       "table{border-collapse:collapse}td,th{border:1px solid #dee2e6;padding:.2em .5em;font-size:90%}"
       ".warn{color:#d62828}code{font-size:85%}")


def render_html(soak: dict[str, Any], png: bytes | None) -> str:
    e = html.escape
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>takeover soak: {e(soak['verdict'])}</title>"
             f"<style>{CSS}</style></head><body><h1 class='{e(soak['verdict'])}'>soak "
             f"{e(soak['verdict'].upper())} ({e(soak['status'])})</h1><p><code>{e(soak['command'])}</code></p>",
             "<table><tr><th>run</th><th>seed</th><th>verdict</th><th>finishes accepted / tasks</th><th>faults</th>"
             "<th>duplicates</th><th>violations</th><th>reproduce</th></tr>"]
    for s in _runs(soak):
        f = s["faults"]
        parts.append(f"<tr><td>{e(s['name'])}</td><td>{s['seed']}</td><td class='{e(s['verdict'])}'>"
                     f"{e(s['verdict'])}</td><td>{s['finished']}/{s['registered']}</td><td>kills {f['kills']}, "
                     f"pauses {f['pauses']}, lost {f['lost_replies']}, slow {f['slow']}</td>"
                     f"<td>{s['duplicate_tasks']}</td><td>{e(_violations(s))}</td><td><code>{e(s['command'])}"
                     "</code></td></tr>")
    parts.append("</table><h2>Resources</h2>")
    for w in soak["resources"]["warnings"]:
        parts.append(f"<p class='warn'>warning: {e(w)}</p>")
    if png:
        parts.append(f"<img alt='resources' src='data:image/png;base64,{base64.b64encode(png).decode()}'>")
    parts.append("</body></html>\n")
    return "".join(parts)


def junit(soak: dict[str, Any]) -> bytes:
    runs = _runs(soak)
    failures = sum(1 for s in runs if s["verdict"] == "invalid")
    skipped = sum(1 for s in runs if s["verdict"] == "inconclusive")
    suite = ET.Element("testsuite", name="takeover.soak", tests=str(len(runs) + 1), failures=str(failures),
                       errors="0", skipped=str(skipped), time=f"{soak['elapsed']:.1f}")
    for s in runs:
        case = ET.SubElement(suite, "testcase", classname=f"takeover.soak.{s['kind']}", name=f"{s['name']} seed "
                             f"{s['seed']}", time=f"{s['elapsed']:.1f}")
        if s["verdict"] == "invalid":
            fail = ET.SubElement(case, "failure", type="InvariantViolated",
                                 message=f"{_violations(s)}; duplicates {s['duplicate_tasks']}")
            fail.text = f"reproduce: {s['command']}\nrun folder: {s['run_dir']}"
        elif s["verdict"] == "inconclusive":
            ET.SubElement(case, "skipped", message=str(s.get("inconclusive") or "inconclusive"))
    case = ET.SubElement(suite, "testcase", classname="takeover.soak", name="resources bounded", time="0")
    if soak["resources"]["warnings"]:
        # A warning, not a failure: growth over one night can be warm-up; the figure decides.
        out = ET.SubElement(case, "system-out")
        out.text = "\n".join(soak["resources"]["warnings"])
    ET.indent(suite)
    return b'<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, encoding="utf-8") + b"\n"


def say(root: Path, soak: dict[str, Any]) -> None:
    """The soak's closing lines, from its ``soak.json`` (``takeover merge`` ends a soak's shards with them)."""
    t = soak.get("totals", {})
    print(f"soak {soak.get('verdict', '?').upper()} ({soak.get('status')}): {t.get('segments', 0)} checkpoints, "
          f"{t.get('replays', 0)} replays, {t.get('finished', 0)} tasks finished, {t.get('violations', 0)} "
          f"violations, {t.get('duplicate_tasks', 0)} task(s) with duplicates")  # fmt: skip
    for w in soak.get("resources", {}).get("warnings", []):
        print(f"  warning: {w}")
    if soak.get("skipped_replays"):
        print(f"  {len(soak['skipped_replays'])} banked seed(s) of other queues not replayed (see {SOAK_FILE})")
    for b in soak.get("banked", []):
        print(f"  banked seed {b['seed']} ({b['segment']}) in {b['bank']}")
    print(f"reports: {root}/{REPORT_HTML}, {root}/{JUNIT_XML}, {root}/{SOAK_FILE}, "
          f"{root}/{RESOURCES_FILE}")
