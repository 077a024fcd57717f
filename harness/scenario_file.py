"""Where the regression files that ``takeover replay`` and ``takeover explore`` wrote find the file format.

Why kept: those files live on in users' repositories and import ``validate_scenarios`` from here
(takeover.replay.output's template); the format itself is :mod:`takeover.scenario.file`.
"""

from takeover.scenario.file import load_scenario_file, validate_scenarios

__all__ = ["load_scenario_file", "validate_scenarios"]
