"""Where the regression files that ``takeover replay`` and ``takeover explore`` wrote find the file format.

Why kept: those files live on in users' repositories and import ``validate_scenarios`` from here
(takeover._internal.replay.output's template); the format itself is :mod:`takeover._internal.scenario.file`.
"""

from takeover._internal.scenario.file import load_scenario_file, validate_scenarios

__all__ = ["load_scenario_file", "validate_scenarios"]
