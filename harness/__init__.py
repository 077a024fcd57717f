"""takeover: a stress harness for lease-based task queues on SQLite.

The Python API (see :mod:`takeover.api`)::

    import takeover

    takeover.scenarios("myq:Queue")                      # the spec's five scenarios, step by step
    result = takeover.stress("myq:Queue", duration=5, seed=1)   # real workers, real faults, checked
    assert result.ok, result.message()
    takeover.check("runs/latest")                        # re-check a stored run
    assert takeover.explore("myq:Queue", seconds=10).ok  # random call sequences, judged by the spec

Why the names are loaded on first use: every worker process of a run imports this package, and the
API pulls in the command line; a worker must not pay for it.

Why the package guards its attribute ``explore``: it is an API function, and also the name of the
package that explores (``from takeover.explore import ...``). Importing a subpackage sets it as an
attribute of its package, which would replace the function with the package the first time anything
imported it; the guard keeps the function. (``scenarios`` needs none: the module that replays them is
takeover.scenario_replay.)
"""

from __future__ import annotations

import sys
import types
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


class _Package(types.ModuleType):
    """The package module, which keeps its API function ``explore`` when the package of that name is imported."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _API and isinstance(value, types.ModuleType):
            return  # the package stays in sys.modules, where ``from takeover.explore import x`` finds it
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
