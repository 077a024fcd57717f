"""junit.xml: one test case per invariant, so CI systems list each one and show its examples."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the reports import no part of the checker at run time
    from takeover.summary_types import InvariantJson, Summary


def render(summary: Summary) -> bytes:
    invs = summary["invariants"]
    cases: list[tuple[str, InvariantJson]] = list(invs.items())
    gate = summary.get("duplicate_gate")
    if summary.get("fail_on_duplicates") or gate:
        d = summary["duplicates"]
        gate_case: InvariantJson = {"valid": not summary["failed_on_duplicates"],
                                    "violations": d.get("extra_actions") or 0, "examples": d.get("examples", [])}
        if gate and gate["reasons"]:
            gate_case["note"] = "; ".join(gate["reasons"])
        cases.append(("no_duplicate_side_effects", gate_case))
    failures = sum(1 for _, c in cases if c["valid"] is False)
    skipped = sum(1 for _, c in cases if c["valid"] not in (True, False))
    suite = ET.Element("testsuite", name="takeover", tests=str(len(cases)), failures=str(failures),
                       errors="0", skipped=str(skipped), time=str(summary.get("check_seconds", 0)))
    props = ET.SubElement(suite, "properties")
    for key in ("queue", "seed", "profile", "command"):
        if key in summary.get("config", {}):
            ET.SubElement(props, "property", name=key, value=str(summary["config"][key]))
    why = summary.get("inconclusive")
    if why:
        ET.SubElement(props, "property", name="inconclusive", value=why)
    # Each invariant's diagnosis leads its failure text: what CI shows first is the likely defect.
    told: dict[str, list[str]] = {}
    for entry in summary.get("diagnosis", []):
        if isinstance(entry, dict) and "sentence" in entry:
            told.setdefault(str(entry.get("invariant")), []).append(
                f"{entry['sentence']} [{entry.get('count')} violation(s), pattern {entry.get('pattern')}]")
    for name, c in cases:
        case = ET.SubElement(suite, "testcase", classname="takeover.invariants", name=name, time="0")
        if c["valid"] is False:
            fail = ET.SubElement(case, "failure", message=f"{name}: {c['violations']} violation(s)",
                                 type="InvariantViolated")
            fail.text = "\n".join([*told.get(name, []), *(json.dumps(e, default=str) for e in c["examples"])]) + (
                f"\n{c['note']}" if c.get("note") else "")
        elif c["valid"] is not True:
            ET.SubElement(case, "skipped", message=c.get("note") or "unknown")
    ET.indent(suite)
    return b'<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, encoding="utf-8") + b"\n"
