"""takeover: a stress harness for lease-based task queues on SQLite, PostgreSQL and Redis, or behind exec:COMMAND.

The Python API (see :mod:`takeover.api`)::

    import takeover

    takeover.scenarios("myq:Queue")                      # the spec's five scenarios, step by step
    result = takeover.stress("myq:Queue", duration=5, seed=1)   # real workers, real faults, checked
    assert result.ok, result.message()
    takeover.check("runs/latest")                        # re-check a stored run
    assert takeover.explore("myq:Queue", seconds=10).ok  # random call sequences, judged by the spec

Why the names are loaded on first use: every worker process of a run imports this package, and the
API pulls in the command line; a worker must not pay for it.

Why no API name is also a module's: importing a submodule sets it as an attribute of its package, which
would replace the API function of the same name the first time anything imported the module. So the
package of the scenarios is takeover._internal.scenario (``from takeover._internal.scenario.replay import
run_scenarios``), and the package that explores is takeover._internal.explorer (``from takeover._internal.explorer
import ExploreResult, explore_queue``); ``takeover.scenarios`` and ``takeover.explore`` are only the functions, with no
guard on the package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from takeover.api import QueueLike, RunResult, ScenarioResult, check, explore, scenarios, stress
    from takeover.version import __version__

__all__ = ["QueueLike", "RunResult", "ScenarioResult", "check", "explore", "scenarios", "stress", "__version__"]
_API = frozenset(__all__) - {"__version__"}


def __getattr__(name: str) -> Any:
    if name == "__version__":  # from takeover.version, loaded on first use too: importing takeover loads nothing
        from takeover.version import __version__

        globals()[name] = __version__
        return __version__
    if name in _API:
        from takeover import api

        value = getattr(api, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'takeover' has no attribute {name!r}")

