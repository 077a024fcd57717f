"""``takeover replay``: a run's violation replayed in one process, shrunk, and kept as a scenario.

:func:`~takeover._internal.replay.core.replay_run` is the entry point; the parts, in the order they act:
``calls`` (one task's calls from the checker's view of the history, and the placements to try),
``judge`` (a replay through the scenario engine, judged by ``model``, the spec's model), ``shrink``
and ``output`` (the scenario file and pytest file). The checker never imports this package.
"""
