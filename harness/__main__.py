import sys

from takeover.cli import main

sys.exit(main())
