"""The ledger's fencing sees what another process wrote to the same file.

Why: the service decides fencing from the highest generation seen, out of an in-memory memo
(tests/unit/test_ledger.py covers it within one process). A second process that writes a higher
generation to the file must make this Ledger refuse a lower one.
"""

from __future__ import annotations

import subprocess
import sys

from takeover._internal.run.ledger import Ledger


def test_fencing_sees_a_higher_generation_written_by_another_process(tmp_path) -> None:
    path = str(tmp_path / "ledger.sqlite")
    ledger = Ledger(path, "fencing")
    assert ledger.act("t1", 1).result == "performed"
    code = ("import sys; from takeover._internal.run.ledger import Ledger; "
            "led = Ledger(sys.argv[1], 'fencing'); led.act('t1', 5)")
    subprocess.run([sys.executable, "-c", code, path], check=True, timeout=60)
    refused = ledger.act("t1", 3)
    assert refused.result == "refused" and not refused.performed
    assert ledger.act("t2", 1).result == "performed"  # a task nobody wrote is still new
    ledger.close()
