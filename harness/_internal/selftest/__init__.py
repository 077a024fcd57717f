"""The selftest: prove the checker's power — every planted bug caught, the reference queue passes.

Each run is a real ``takeover stress --profile stress --duration 10`` (the detection bench's run;
``--quick``: 3 s of profile ``smoke``) in a child process (real workers, real signals,
takeover._internal.child_run.stress_command), checked by the same checker users get. A planted bug counts as caught
when one of the invariants it targets is violated; the time to detection is the wall time of the run that
caught it, and when the first violation happened in that run. Each planted bug declares the model-coverage
cells its defect lives on (takeover.queues.planted.NEEDS_CELLS): a run on it that reached none of them could
not have shown the bug, and says so (NEVER REACHED); the selftest fails when no run of the bug reached one,
or the run that caught it did not (:func:`takeover._internal.selftest.verdict.cells_failed`).

Why a package beside sweep/ and tune/: ``takeover selftest`` only parses and calls :func:`runs.run_selftest`;
``takeover merge`` joins a sharded selftest with :func:`merge.merge_selftest`, and both end with
:func:`verdict.conclude`.

- :mod:`.runs`: which runs (profile, seconds, bugs, seeds), made through a launcher, each try judged;
- :mod:`.verdict`: a run's judgement, the lines printed, the verdict and exit code;
- :mod:`.merge`: the shards of ``--shard I/N`` joined into the one result.
"""
