"""Measuring a queue's mutants: which to run, each through the stages, the score, ``mutate.json``.

Why apart from the command: ``takeover mutate`` and the bench's mutation figures
(takeover.benchmarks.mutation) measure the same way; the command parses its arguments and prints the
table, the measuring is here.
"""

from __future__ import annotations

import fnmatch
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

from takeover._internal import db, store
from takeover._internal.scratch import scratch_dir
from takeover.errors import UsageError

MUTATE_FILE = "mutate.json"


def select(mutants: list[Any], only: list[str] | None, sample: int | None, seed: int) -> list[Any]:
    """The mutants to run: those matching ``only``, then a sample of ``sample`` of them (in their order)."""
    chosen = [m for m in mutants if not only or any(fnmatch.fnmatchcase(m.id, p) for p in only)]
    if only and not chosen:
        raise UsageError(f"--only {' '.join(only)} matches no mutant (see takeover mutate --list)")
    if sample is not None and sample < len(chosen):
        keep = set(random.Random(seed).sample(range(len(chosen)), sample))
        chosen = [m for i, m in enumerate(chosen) if i in keep]
    return chosen


def read_prior(path: str, queue: str, seed: int, stress_seconds: float) -> dict[str, dict[str, Any]]:
    """The mutants of an earlier mutate.json, by id; UsageError unless it is one of the same queue and runs."""
    try:
        doc = store.loads_json(Path(path).read_bytes())
    except (OSError, ValueError) as exc:
        raise UsageError(f"--resume {path!r}: cannot read it as a mutate.json: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("mutants"), list):
        raise UsageError(f"--resume {path!r} is not a mutate.json (no mutants list)")
    same = (doc.get("queue"), doc.get("seed"), doc.get("stress_seconds")) == (queue, seed, stress_seconds)
    if not same:
        raise UsageError(f"--resume {path!r} is of {doc.get('queue')} (seed {doc.get('seed')}, stress "
                         f"{doc.get('stress_seconds')} s), not of {queue} (seed {seed}, stress {stress_seconds:g} s)")
    return {m["id"]: m for m in doc["mutants"] if isinstance(m, dict) and "id" in m}


def measure(queue: str, database: str, mutants: list[Any], out: Path, seed: int, stress_seconds: float,
            explore_seconds: float, stages: tuple[str, ...], *, generated: int, command: str = "",
            progress: bool = True, prior: dict[str, dict[str, Any]] | None = None,
            verify_equivalents: bool = False, explore_examples: int = 200) -> dict[str, Any]:
    """Run ``mutants`` (inside a served ``database``) and write ``out/mutate.json`` after each; the document."""
    import takeover._internal.pipeline  # noqa: F401 - the checker loaded before the first run (see takeover hunt)
    from takeover.mutation.equivalent import EQUIVALENT
    from takeover.mutation.report import figures
    from takeover.mutation.runner import STRESS, Runner, Settings

    out.mkdir(parents=True, exist_ok=True)
    settings = Settings(seed=seed, stress_seconds=stress_seconds, explore_seconds=explore_seconds, stages=stages,
                        database=database, verify_equivalents=verify_equivalents, explore_examples=explore_examples)
    doc: dict[str, Any] = {
        "queue": queue, "db": db.redact(database), "seed": seed, "stress_seconds": stress_seconds,
        "explore_seconds": explore_seconds, "explore_examples": explore_examples,
        "stages": list(stages), "generated": generated, "run": len(mutants),
        "command": command, "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "load_avg": [round(x, 2) for x in os.getloadavg()], "verify_equivalents": verify_equivalents,
        "status": "running",
    }  # fmt: skip
    outcomes = []
    started = time.monotonic()
    with scratch_dir("takeover-mutants-") as tmp, \
            Runner(Path(tmp), out / "runs", settings, EQUIVALENT) as runner:
        try:
            if STRESS in stages:
                if progress:
                    print("reference: a stress run of the queue as it is ...", file=sys.stderr, flush=True)
                doc["reference"] = runner.baseline(queue)
                if doc["reference"]["verdict"] == "INVALID":
                    print(f"takeover mutate: the queue as it is failed its stress run ({doc['reference']['detail']}): "
                          "a kill by stress says nothing", file=sys.stderr, flush=True)
            for i, mutant in enumerate(mutants, start=1):
                outcome = runner.run(mutant, (prior or {}).get(mutant.id))
                outcomes.append(outcome)
                if progress:
                    where = f" by {outcome.stage}" if outcome.stage else ""
                    when = "" if outcome.time_to_kill_s is None else f" in {outcome.time_to_kill_s:.2f} s"
                    print(f"[{i}/{len(mutants)}] {mutant.id}: {outcome.verdict}{where}{when}", file=sys.stderr,
                          flush=True)
                _write(out, doc, outcomes, figures, started)
        except KeyboardInterrupt:
            doc["status"] = "interrupted"
            _write(out, doc, outcomes, figures, started)
            raise
    doc["status"] = "finished"
    return _write(out, doc, outcomes, figures, started)


def _write(out: Path, doc: dict[str, Any], outcomes: list[Any], figures: Any, started: float) -> dict[str, Any]:
    doc["elapsed_s"] = round(time.monotonic() - started, 1)
    doc["figures"] = figures(outcomes)
    doc["mutants"] = [o.to_json() for o in outcomes]
    tmp = out / (MUTATE_FILE + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    tmp.replace(out / MUTATE_FILE)
    return doc
