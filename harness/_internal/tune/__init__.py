"""``takeover tune``: a lease and heartbeat for the user's own task durations, found by a search of real runs.

Modules: ``plan`` (the workload in production units, the time scale, each run's config), ``search``
(the bisection on Wilson bounds, with no runs in it), ``driver`` (the searches driven by real runs
through the sweep's runner), ``result`` (``tuning.json``). The report is rendered by
``takeover.reports.tuning``.
"""
