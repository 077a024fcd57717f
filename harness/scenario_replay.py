"""Where the regression files that ``takeover replay`` and ``takeover explore`` wrote find the replay.

Why kept: those files live on in users' repositories and import ``run_scenarios`` from here
(takeover.replay.output's template); the replay itself is :mod:`takeover.scenario.replay`.
"""

from takeover.scenario.replay import run_scenarios

__all__ = ["run_scenarios"]
