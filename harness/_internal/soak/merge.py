"""A soak's shards (``takeover soak --shard I/N``) and their merge into one soak.

What a shard is: segment i of the whole soak (seg-0001 is i = 0, seed ``base.seed + i``) goes to shard
``i mod N + 1``, and so does the i-th banked seed's replay; each shard runs its own ``--minutes``. N shards
side by side are therefore what one soak on a cluster of N slots (``--cluster``) makes in the same time: the
segments numbered, seeded and sized as there, N at a time. A shard's ``shard.json`` names the soak by its
segments' base config (the seed, the profile, every rate), its ``--minutes`` and ``--checkpoint``, so the
merge refuses the shards of two different soaks.

The merge (:func:`merge_soak`): every shard's segments and replays in their soak order (seg-0001, seg-0002,
... whichever shard made them), their folders copied, the totals summed, the banked seeds of every shard,
the verdict and exit code computed from the joined segments as the soak computes them
(:meth:`takeover._internal.soak.driver.Soak.exit_code`), and the seed banks beside the shards' folders joined into
the merged folder's ``seed-bank.json``. Resource samples are each machine's own: ``soak.json`` keeps each
shard's peak and warnings (named by shard), not one series.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from takeover._internal import store
from takeover.errors import UsageError
from takeover.exit_codes import ExitCode


def _identity(soak: dict[str, Any]) -> str:
    """What two shards of one soak share: the segments' base config (less its folder), minutes, checkpoint."""
    config = {k: v for k, v in soak.get("config", {}).items() if k != "out"}
    return json.dumps({"config": config, "minutes": soak.get("minutes"), "checkpoint": soak.get("checkpoint")},
                      sort_keys=True)


def _join_banks(dirs: list[Path], out: Path) -> Path | None:
    """The seed banks beside the shards' folders (where a soak keeps its bank by default, and where a CI
    shard's artifact holds it), each failure once, as ``seed-bank.json`` in the merged folder: the bank the
    next night's shards replay. None when no shard has one there."""
    from takeover._internal.soak import seedbank

    banks = [d.parent / seedbank.BANK_FILE for d in dirs if (d.parent / seedbank.BANK_FILE).is_file()]
    if not banks:
        return None
    joined = out / seedbank.BANK_FILE
    seedbank.save(joined, seedbank.load_all(banks))
    return joined


def write_soak_shard(root: Path, shard: tuple[int, int], soak: dict[str, Any]) -> None:
    from takeover._internal.fanout.merge import write_shard

    write_shard(root, "soak", shard, [_identity(soak)], {"command": soak.get("command", "")})


def merge_soak(shards: list[dict[str, Any]], out: Path) -> tuple[ExitCode, dict[str, Any]]:
    """Join the shards' soaks into ``out``: ``soak.json`` and the soak's reports; the exit code a soak gives."""
    from takeover._internal.soak.display import Totals

    docs = []
    for s in sorted(shards, key=lambda s: s["shard"][0]):
        doc = store.read_soak_summary(s["dir"])
        if doc is None:
            raise UsageError(f"merge: {s['dir']} has no {store.SOAK_FILE}")
        docs.append((s, doc))
    out.mkdir(parents=True, exist_ok=True)
    joined: dict[str, list[dict[str, Any]]] = {"segments": [], "replays": []}
    for s, doc in docs:
        for key, rows in joined.items():
            for seg in doc.get(key, []):
                src = s["dir"] / seg["name"]
                if src.is_dir():
                    shutil.copytree(src, out / seg["name"])
                rows.append({**seg, "run_dir": str(out / seg["name"])})
    for rows in joined.values():
        rows.sort(key=lambda seg: seg["name"])
    totals = Totals()
    for seg in joined["replays"] + joined["segments"]:
        totals.add_segment(seg)
    done = joined["segments"] + joined["replays"]
    interrupted = any(doc.get("status") != "finished" for _, doc in docs)
    code = (ExitCode.VIOLATED if any(seg["verdict"] == "invalid" for seg in done) else ExitCode.INTERRUPTED
            if interrupted else ExitCode.INCONCLUSIVE if not done or all(seg["verdict"] == "inconclusive"
                                                                           for seg in done) else ExitCode.VALID)
    verdict = ("invalid" if code == ExitCode.VIOLATED else "valid" if any(seg["verdict"] == "valid" for seg in done)
               else "inconclusive")  # fmt: skip
    first = docs[0][1]
    peaks: dict[str, float] = {}
    for _, doc in docs:
        for name, value in doc.get("resources", {}).get("peak", {}).items():
            peaks[name] = max(peaks.get(name, value), value)
    summary = {
        "status": "interrupted" if interrupted else "finished", "pid": None, "verdict": verdict,
        "exit_code": int(code), "started": min(doc.get("started", 0) for _, doc in docs), "updated": time.time(),
        "elapsed": max(doc.get("elapsed", 0) for _, doc in docs), "minutes": first.get("minutes"),
        "checkpoint": first.get("checkpoint"), "command": first.get("command", ""),
        "seed_bank": first.get("seed_bank"), "config": first.get("config", {}),
        "totals": {"segments": len(joined["segments"]), "replays": len(joined["replays"]),
                   "finished": totals.finished, "kills": totals.kills, "pauses": totals.pauses,
                   "lost_replies": totals.lost_replies, "slow": totals.slow,
                   "duplicate_tasks": totals.duplicate_tasks, "violations": totals.violations,
                   "invalid": totals.invalid},
        "segments": joined["segments"], "replays": joined["replays"],
        "banked": [b for _, doc in docs for b in doc.get("banked", [])],
        "skipped_replays": first.get("skipped_replays", []),
        "resources": {"samples": sum(doc.get("resources", {}).get("samples", 0) for _, doc in docs),
                      "warnings": [f"shard {s['shard'][0]}: {w}" for s, doc in docs
                                   for w in doc.get("resources", {}).get("warnings", [])],
                      "peak": peaks, "last": {}},
        "shards": len(docs),
    }  # fmt: skip
    bank = _join_banks([s["dir"] for s, _ in docs], out)
    if bank is not None:
        summary["seed_bank"] = str(bank)
    store.write_soak_summary(out, summary)
    try:
        from takeover.reports import soak as soak_report

        soak_report.write(out, summary, [])
    except Exception as exc:  # noqa: BLE001 - soak.json already holds the verdict
        print(f"takeover merge: could not write the soak report: {type(exc).__name__}: {exc}")
    return code, summary
