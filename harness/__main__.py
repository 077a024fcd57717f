"""``python -m takeover``: the command line (:mod:`takeover.cli`), as the ``takeover`` script runs it."""

import sys

from takeover.cli import main

sys.exit(main())
