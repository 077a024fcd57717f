"""The hunt (``takeover hunt``) as a library: :func:`run_hunt` (:mod:`takeover._internal.hunter.core`) with
:class:`HuntOptions`, its loop (:mod:`takeover._internal.hunter.hunt`), the loop's runs on a dask cluster
(:mod:`takeover._internal.hunter.cluster`), its status line (:mod:`takeover._internal.hunter.display`).

Why ``hunter`` and not ``hunt``: a package named as an API function would replace the function the first
time it is imported (see the package's ``__init__``); ``takeover.hunt`` stays free for one.
"""

from takeover._internal.hunter.core import run_hunt
from takeover._internal.hunter.hunt import HuntOptions

__all__ = ["HuntOptions", "run_hunt"]
