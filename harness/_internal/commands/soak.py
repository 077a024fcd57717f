"""``takeover soak``: a long run under faults, bounded in memory and disk, checked every few minutes.

First every banked failing seed is replayed (``--seed-bank``, or ``$TAKEOVER_SEED_BANK``, or
``seed-bank.json`` beside the soak folder, with takeover's own ``workloads/seed-bank.json``), then segments
of ``--checkpoint`` seconds run back to back until ``--minutes`` are used up, tasks arriving
continuously at the profile's arrival rate. Each segment is checked when it ends (the checkpoint)
and ``soak.json`` is rewritten, so a soak that is killed still leaves the verdict of everything
checked so far. A segment that finds a violation banks its seed and config. See
:mod:`takeover._internal.soak.driver` for why segments keep memory and disk bounded.

Exit codes: 0 valid, 1 a violation (in a segment or a replayed seed), 2 bad input, 3 nothing was
tested, 130 interrupted with no violation found.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from takeover._internal import db
from takeover._internal.config import RunConfig
from takeover._internal.options import RUN_OPTIONS, db_given
from takeover.errors import UsageError
from takeover.exit_codes import ExitCode

if TYPE_CHECKING:
    from takeover._internal.fanout.launch import Launcher
    from takeover._internal.soak.driver import Soak

HELP = "soak: replay banked failing seeds, then checked segments under faults for --minutes (nightly CI)"

MINUTES_ENV = "SOAK_MINUTES"
DEFAULT_MINUTES = 60.0
DEFAULT_ARRIVAL = 10.0  # tasks per second when the profile has none: a soak must keep tasks coming


def configure(parser: argparse.ArgumentParser) -> None:
    from takeover._internal.config import profile_defaults, profile_names
    from takeover._internal.options import add_stress_options

    parser.add_argument("--minutes", type=float,
                        help=f"length of the soak in minutes, its segments back to back (default ${MINUTES_ENV} "
                             f"or {DEFAULT_MINUTES:g}); 0 = replay the banked seeds only")  # fmt: skip
    parser.add_argument("--checkpoint", type=float, default=300.0,
                        help="seconds between checkpoints: each segment runs this long, then is checked (default 300)")
    parser.add_argument("--sample", type=float, default=5.0, help="seconds between resource samples (default 5)")
    parser.add_argument("--seed-bank", help="the bank of failing seeds, replayed first and where new ones go "
                                            "(default $TAKEOVER_SEED_BANK, else seed-bank.json beside the soak "
                                            "folder: runs/seed-bank.json, or DIR/seed-bank.json for --out "
                                            "DIR/soak)")  # fmt: skip
    parser.add_argument("--no-replay", action="store_true", help="do not replay the banked seeds first")
    parser.add_argument("--keep", choices=("failed", "all"), default="failed",
                        help="which checked segments keep their history, queue and ledger (default failed)")
    # the options soak refuses (NOT_FOR_SOAK) are there, hidden
    add_stress_options(parser, "soak", profile_names(), profile_defaults())
    parser.set_defaults(profile="stress")
    from takeover._internal.options import add_fanout_options

    add_fanout_options(parser)


# The stress options that a soak decides itself: refused, with the reason.
NOT_FOR_SOAK = {o.flag: o.soak for o in RUN_OPTIONS if o.soak} | {
    "--reconcile": "a soak checks each segment as it ran",
}


def resolve_minutes(given: float | None) -> float:
    if given is not None:
        value, name = given, "--minutes"
    else:
        raw = os.environ.get(MINUTES_ENV, "").strip()
        if not raw:
            return DEFAULT_MINUTES
        name = MINUTES_ENV
        try:
            value = float(raw)
        except ValueError:
            raise UsageError(f"{MINUTES_ENV} must be a number of minutes, got {raw!r}") from None
    if not value >= 0 or value == float("inf"):
        raise UsageError(f"{name} must be a number of minutes >= 0, got {value!r}")
    return value


def header(base: RunConfig, minutes: float, checkpoint: float, root: Path, pinned: tuple[str, ...] = (),
           shard: tuple[int, int] | None = None) -> list[str]:
    """The soak's header: how long it runs, in what segments, and the line that reproduces the first one.

    Only the first segment's length is known up front (drains and checks count against the budget),
    and it is the shorter of ``--checkpoint`` and ``--minutes``: ``--minutes 1`` runs one 60 s segment,
    whatever the checkpoint. The length comes from the driver's own ``segment_length``, so the printed
    line is exactly the run that follows.
    """
    from takeover._internal.soak.driver import segment_config, segment_length, segment_name

    part = f" (shard {shard[0]}/{shard[1]}: segments {shard[0]}, {shard[0]}+{shard[1]}, ...)" if shard else ""
    first = segment_length(checkpoint, minutes * 60.0) if minutes > 0 else None
    if first is None:
        return [f"takeover soak: the banked seeds only (--minutes {minutes:g}){part}, folder {root}"]
    index, step = (shard[0] - 1, shard[1]) if shard else (0, 1)
    if minutes * 60.0 <= checkpoint:
        shape, then = f"one segment of {first:g} s, checked as it ends", ""
    else:
        shape = f"segments of {first:g} s back to back, each checked as it ends (the last gets what is left)"
        then = f" (then seed +{step} per segment" + (", each drawing its own fault mix)" if base.swarm else ")")
    return [f"takeover soak: {minutes:g} min in {shape}{part}; folder {root}",
            f"{segment_name(index)} runs: {segment_config(base, index, first, pinned).command()}{then}"]  # fmt: skip


def run(args: argparse.Namespace) -> ExitCode:
    from takeover._internal import store, stress_run
    from takeover._internal.soak import seedbank
    from takeover._internal.soak.driver import MIN_SEGMENT, segment_length

    for flag, why in NOT_FOR_SOAK.items():
        value = getattr(args, flag[2:].replace("-", "_"), None)
        if value is not None and value is not False:  # given at all: `--duration 0` is refused too
            raise UsageError(f"{flag} does not apply to takeover soak: {why}")
    from takeover._internal.fanout.launch import check_cluster

    check_cluster(args.cluster, db=db_given(args))
    minutes = resolve_minutes(args.minutes)
    if not args.checkpoint >= MIN_SEGMENT:  # a shorter segment would never run: the soak did nothing
        raise UsageError(f"--checkpoint must be at least {MIN_SEGMENT:g} s (a segment's length), "
                         f"got {args.checkpoint!r}")  # fmt: skip
    if minutes > 0 and segment_length(args.checkpoint, minutes * 60.0) is None:
        raise UsageError(f"--minutes {minutes:g} is shorter than one segment ({MIN_SEGMENT:g} s); "
                         f"use 0 to replay the banked seeds only")  # fmt: skip
    if not args.sample > 0:
        raise UsageError(f"--sample must be a positive number of seconds, got {args.sample!r}")
    base, pinned = stress_run.resolve_base(args)  # with --swarm, each segment draws its own mix around it
    if base.arrival_rate == 0 and args.arrival_rate is None:
        base = dataclasses.replace(base, arrival_rate=DEFAULT_ARRIVAL)
    bank = seedbank.bank_path(args.seed_bank, args.out)
    # --seed-bank names exactly one bank; otherwise takeover's own committed bank is replayed too (read,
    # never written), so a bank kept elsewhere ($TAKEOVER_SEED_BANK, e.g. a CI cache) adds to it.
    replay_from = (bank,) if args.seed_bank else (seedbank.DEFAULT_BANK, bank)
    if not args.no_replay:
        seedbank.load_all(list(replay_from))  # a broken bank is bad input: say so before starting
    seedbank.load(bank)  # new failures are added to it: it must be readable and writable
    seedbank.check_writable(bank)
    store.check_out(args.out)
    with db.serve(db_given(args), keep=args.keep_db):
        stress_run.check_queue(base.queue)
        from takeover._internal.fanout.launch import open_launcher

        launcher = open_launcher(args.cluster, db=db_given(args))
        try:
            return _run(args, base, pinned, minutes, bank, replay_from, launcher)
        finally:
            launcher.close()


def _run(args: argparse.Namespace, base: RunConfig, pinned: tuple[str, ...], minutes: float, bank: Path,
         replay_from: tuple[Path, ...], launcher: Launcher | None = None) -> ExitCode:
    from takeover._internal import store
    from takeover._internal.soak.display import SoakDisplay
    from takeover._internal.soak.driver import Soak, SoakOptions
    from takeover.reports.soak import say

    root = store.create(args.out)
    command = " ".join(shlex.quote(a) for a in ["takeover", "soak", *sys.argv[2:]]) if len(sys.argv) > 1 else ""
    opts = SoakOptions(
        base=base, pinned=pinned, out=root, minutes=minutes, checkpoint=args.checkpoint, sample=args.sample, bank=bank,
        replay_from=replay_from, replay=not args.no_replay, keep=args.keep,
        fail_on_duplicates=args.fail_on_duplicates, max_duplicates_per_1000=args.max_duplicates_per_1000,
        command=command, shard=args.shard,
    )  # fmt: skip
    for line in header(base, minutes, args.checkpoint, root, pinned, args.shard):
        print(line, flush=True)
    cluster = launcher if launcher is not None and launcher.remote else None
    if cluster is not None:
        from takeover._internal.fanout.launch import announce

        announce(cluster)
    with SoakDisplay(sys.stderr) as display:
        if cluster is not None:
            from takeover._internal.soak.cluster import ClusterSoak

            soak_run: Soak = ClusterSoak(opts, display, launcher=cluster)
        else:
            soak_run = Soak(opts, display)
        code = soak_run.run()
    if cluster is not None:
        from takeover._internal.fanout.launch import fanout_outcome, write_record
        from takeover._internal.soak.cluster import ClusterSoak

        assert isinstance(soak_run, ClusterSoak)
        write_record(root, soak_run.done, cluster)
        code = fanout_outcome("soak", soak_run.cluster_lost, [d for d in soak_run.done if d.lost]) or code
    soak = store.read_soak_summary(root) or {}
    if args.shard:
        from takeover._internal.soak.merge import write_soak_shard

        write_soak_shard(root, args.shard, soak)
    say(root, soak)
    return code


