"""The hunt (``takeover hunt``) as a library: :func:`run_hunt` (:mod:`takeover.hunter.core`) with
:class:`HuntOptions`, its loop (:mod:`takeover.hunter.hunt`), the loop's runs on a dask cluster
(:mod:`takeover.hunter.cluster`), its status line (:mod:`takeover.hunter.display`).

Why ``hunter`` and not ``hunt``: a package named as an API function would replace the function the first
time it is imported (see the package's ``__init__``); ``takeover.hunt`` stays free for one.
"""

from takeover.hunter.core import run_hunt
from takeover.hunter.hunt import HuntOptions

__all__ = ["HuntOptions", "run_hunt"]
