"""``python -m tests.helpers.hold_before_check SECONDS ARGV...``: ``takeover ARGV...`` that holds where the check
of a stress run starts, says so on stderr (:data:`HOLD_LINE`) and waits SECONDS, then checks as ever.

Why: a test that presses Ctrl-C while the checker runs, on a line printed just before the check, races the
check: on a loaded machine the test reads the line late and the check is over first. Held there, the test's
Ctrl-C lands before the check every time. The hold is the test's own, installed here around the real check
(takeover._internal.pipeline.check_and_report, which the stress run looks up when its check starts): takeover itself
carries no test hook.
"""

from __future__ import annotations

import sys
import time
from typing import Any

HOLD_LINE = "takeover stress: holding before the check"


def main(argv: list[str]) -> int:
    seconds = float(argv[0])
    from takeover._internal import pipeline
    from takeover.cli import main as takeover

    check = pipeline.check_and_report

    def held(*args: Any, **kwargs: Any) -> Any:
        print(f"{HOLD_LINE} ({seconds:g} s)", file=sys.stderr, flush=True)
        time.sleep(seconds)
        return check(*args, **kwargs)

    pipeline.check_and_report = held
    return takeover(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
