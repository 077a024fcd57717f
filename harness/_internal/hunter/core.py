"""The hunt as a library call: short runs on successive seeds, aimed and swarm in turn, until the first violation.

Why: a long stress run spends most of its time in states it has seen already; a bug is found sooner by
many short runs that each start afresh and each fault the queue differently. A hunt alternates the
two kinds of run that find different bugs: the profile as it is (every fault kind on, the aimed ones
included: ``aimed``) and a swarm draw (a random part of the kinds, at random rates, from the run's seed:
``swarm``, see :mod:`takeover._internal.swarm`), one seed after the other. Each run is ``--run-seconds`` of faults,
then its drain and its check. The hunt stops at the first violation and prints the run folder, the
invariants broken, the line that reproduces the run and how soon it was found; or it stops when the
next run would not finish within what is left of ``--budget`` (estimated from the longest run so far).
The loop itself, what is kept and the exit code: :mod:`takeover._internal.hunter.hunt`.

Why here and not in the command: ``takeover hunt`` parses its options into a :class:`HuntOptions` and
prints; the hunt itself (:func:`run_hunt`) is the library's, as the soak, the sweep and tune are, so the
Python API and a script can run one and get its ``hunt.json`` back without a command line.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TextIO

from takeover._internal import db, store
from takeover._internal.fanout.launch import (
    Launcher,
    announce,
    check_cluster,
    fanout_outcome,
    open_launcher,
    write_record,
)
from takeover._internal.hunter.cluster import ClusterHunt
from takeover._internal.hunter.display import HuntDisplay
from takeover._internal.hunter.hunt import MODES, Hunt, HuntOptions


def out_dir(out: str | None) -> Path:
    path = Path(out) if out else Path(store.DEFAULT_BASE) / time.strftime("hunt-%Y%m%d-%H%M%S")
    store.check_out(str(path))
    return path


def run_hunt(opts: HuntOptions, console: TextIO) -> Hunt:
    """The whole hunt: its options checked (a one-line UsageError before anything starts), the database
    served, the queue checked, then the runs, here or on a cluster; what it printed goes to ``console``
    (the header, a line per run, the outcome). Returns the hunt, whose :meth:`Hunt.exit_code` is the
    command's and whose :meth:`Hunt.summary` is ``hunt.json``."""
    from takeover._internal.stress_run import check_queue

    opts.check()
    check_cluster(opts.cluster, db=opts.db)
    first = [opts.run_config(opts.seed + i, mode) for i, mode in enumerate(MODES)]  # bad input stops here
    root = out_dir(opts.out)
    with db.serve(opts.db, keep=opts.keep_db):
        check_queue(first[0].queue)
        launcher = open_launcher(opts.cluster, db=opts.db)
        try:
            return _run(opts, root, first[0].queue, first[0].profile, console, launcher)
        finally:
            launcher.close()


def _run(opts: HuntOptions, root: Path, queue: str, profile: str, console: TextIO,
         launcher: Launcher | None = None) -> Hunt:
    root.mkdir(parents=True, exist_ok=True)
    print(f"takeover hunt: {queue}, profile {profile}, runs of {opts.run_seconds:g} s of faults "
          f"from seed {opts.seed}, aimed and swarm in turn, budget {opts.budget:g} s; folder {root}", file=console,
          flush=True)  # fmt: skip
    remote = launcher is not None and launcher.remote
    with HuntDisplay(console, opts.budget) as display:
        if remote:
            assert launcher is not None
            announce(launcher)
            hunt: Hunt = ClusterHunt(opts, root, display, queue, launcher=launcher)
        else:
            hunt = Hunt(opts, root, display, queue)
        hunt.code = hunt.run()
    hunt.print_outcome(console)
    if opts.shard:
        from takeover._internal.fanout.merge import write_shard

        meta = {k: v for k, v in hunt.summary().items() if k not in ("runs", "found", "status", "verdict", "exit_code")}
        write_shard(root, "hunt", opts.shard, [], meta)
    if remote:
        assert isinstance(hunt, ClusterHunt) and launcher is not None
        write_record(root, hunt.done, launcher)
        hunt.code = fanout_outcome("hunt", hunt.cluster_lost, []) or hunt.code
    return hunt
