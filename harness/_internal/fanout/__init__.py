"""Where the multi-run commands start their runs: here, one at a time, or on a dask cluster (``--cluster``).

Why one seam: sweep, tune, hunt, soak, selftest and ``bench --detection`` each make many independent runs
(one process tree, one seed, one run folder each). They differ in how they choose the next run and what they
make of a finished one, not in how a run is started; so each hands its runs to a :class:`Launcher`
(:mod:`takeover._internal.fanout.launch`) and reads the finished run from its folder as it always did:

- :class:`~takeover._internal.fanout.launch.LocalLauncher` (the default) makes each run exactly as the command made it
  before there was a seam: the same call, in the same process, one at a time;
- :class:`~takeover._internal.fanout.cluster.ClusterLauncher` (``--cluster tcp://HOST:PORT`` or ``local:N``) sends each
  run to a dask worker as its reproduce line (``takeover stress ...``), run in a subprocess in a scratch folder
  there (:mod:`takeover._internal.fanout.remote`); the run folder comes back compressed and is stored where the local
  run would have been. Nothing is shared through a filesystem.

dask is the optional extra ``takeover[cluster]``: nothing here imports it until ``--cluster`` is given.
"""
