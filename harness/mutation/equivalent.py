"""The reviewed table of equivalent mutants: mutant id -> why no run can tell it from the original.

No tool decides equivalence, so each entry here was read and argued by a person; a mutant that survives
and is not here is a survivor, listed as such. The ids must exist in the generated set (a unit test
holds the table to that, so a change of the reference queues cannot leave stale entries behind), and a
listed mutant that some stage kills is reported as a wrong entry, not silently counted equivalent.
"""

from __future__ import annotations

EQUIVALENT: dict[str, str] = {}
