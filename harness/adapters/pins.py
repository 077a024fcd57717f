"""The one release an adapter was written for: checked before the library is imported.

Why its own module: each adapter translates one release's code (the file:line references on its page in
docs/analyses/), and the PostgreSQL adapters' shared module imports psycopg, which a Redis adapter's
install does not bring. A missing library, or another release that may differ, is refused in one line
rather than tested as something else; the extra of the same name installs the pinned release.
"""

from __future__ import annotations

import importlib.metadata

from takeover.errors import ContractError


def require_library(
    distribution: str, pinned: str | tuple[str, ...], module: str | None = None, extra: str | None = None
) -> str:
    """The installed version of ``distribution`` if it is one of ``pinned``; a one-line ContractError
    otherwise. A tuple names releases the adapter translates alike (a fix's before and after).
    ``module`` names the adapter's module and ``extra`` the extra, where they differ from the
    distribution's name (``takeover.adapters.taskiq_redis``, a library it brings besides)."""
    allowed = (pinned,) if isinstance(pinned, str) else pinned
    module = module or distribution
    extra = extra or distribution
    try:
        found = importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        raise ContractError(
            f"takeover.adapters.{module} needs the {distribution} library: pip install 'takeover[{extra}]'"
        ) from None
    if found not in allowed:
        raise ContractError(
            f"takeover.adapters.{module} was written for {distribution} {' or '.join(allowed)}, found {found}: "
            f"pip install 'takeover[{extra}]'"
        )
    return found
