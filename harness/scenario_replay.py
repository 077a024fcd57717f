"""Where the regression files that ``takeover replay`` and ``takeover explore`` wrote find the replay.

Why kept: those files live on in users' repositories and import ``run_scenarios`` from here
(takeover._internal.replay.output's template); the replay itself is :mod:`takeover._internal.scenario.replay`.
"""

from takeover._internal.scenario.replay import run_scenarios

__all__ = ["run_scenarios"]
