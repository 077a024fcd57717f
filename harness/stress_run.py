"""One stress run as a library call: from options to a validated config, and the queue's check first.

Why a module of its own, below the commands: ``takeover stress``, the Python API (takeover.api), hunt,
soak, sweep, tune and mutate all start stress runs, and each must resolve its options exactly as
``takeover stress`` does (the run's reproduce line is then a plain ``takeover stress`` line) and refuse a
queue that fails the contract before any folder exists. The commands parse arguments and print; the
work is here, where a feature (takeover.mutation) can reach it without importing a command.

``resolve`` takes the options by their dest (``task_time_mean``), as an ``argparse.Namespace`` from a
parser built by :func:`takeover.options.add_run_options` or as a plain mapping; an option that is absent
or None keeps the profile's value.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from takeover import db, swarm
from takeover.config import RunConfig, load_profile, with_database, with_overrides
from takeover.contract import load_queue_factory, open_queue
from takeover.errors import UsageError
from takeover.locate import locate
from takeover.options import DEFAULT_PROFILE, FAULT_RATES, db_given, given

Options = argparse.Namespace | Mapping[str, Any]


def _namespace(options: Options) -> argparse.Namespace:
    if isinstance(options, argparse.Namespace):
        return options
    values = dict(options)
    values.setdefault("profile", DEFAULT_PROFILE)
    return argparse.Namespace(**values)


def resolve(options: Options) -> RunConfig:
    """Profile + options (+ the swarm draw, with ``--swarm``) -> a validated RunConfig. Raises UsageError;
    creates nothing."""
    base, pinned = resolve_base(options)
    return swarm.draw(base, pinned).validate() if base.swarm else base


def resolve_base(options: Options) -> tuple[RunConfig, tuple[str, ...]]:
    """Profile + options, validated, before any swarm draw; and the fault kinds whose rate was given
    explicitly, which a swarm draw keeps as given. The config carries where the queue and the profile
    were found (takeover.locate), so its reproduce line runs again from a fresh shell.

    The soak needs the two apart: each of its segments draws its own mix around the same base.
    """
    args = _namespace(options)
    base = load_profile(args.profile)
    overrides = given(args, "stress")
    no_faults = getattr(args, "no_faults", False)
    if no_faults and overrides.get("swarm"):
        raise UsageError("--swarm draws the fault rates and --no-faults sets them all to 0: give one of them")
    pinned = tuple(o.field.partition(".")[2] for o in FAULT_RATES if overrides[o.dest] is not None)
    # --no-faults zeroes the profile's rates; a rate given explicitly beside it still counts
    # (e.g. `--no-faults --kill-rate 1` is a run with kills only).
    if no_faults:
        for dest in [o.dest for o in FAULT_RATES] + ["clock_skew_max", "clock_jump_rate"]:
            if overrides[dest] is None:
                overrides[dest] = 0.0
    cfg = with_overrides(base, overrides)
    cfg = with_database(cfg, db_given(args), queue_given=overrides["queue"] is not None).validate()
    where = locate(cfg.queue, cfg.profile)
    return dataclasses.replace(cfg, workdir=where.workdir, pythonpath=where.pythonpath), pinned


def check_queue(spec: str) -> None:
    """Open the queue once on a scratch database (of the --db being served): a queue that fails the
    contract, or does not take that kind of database, stops us here."""
    factory = load_queue_factory(spec)
    with tempfile.TemporaryDirectory(prefix="takeover-check-") as tmp, \
            db.current().database(Path(tmp), "check") as database:
        queue = open_queue(spec, database, factory)
        try:
            queue.close()
        except Exception as exc:  # noqa: BLE001
            raise UsageError(f"queue {spec!r}: close() failed: {type(exc).__name__}: {exc}") from None
