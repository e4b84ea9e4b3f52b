"""``python -m securefg ...``: the same CLI as the ``securefg`` command (for checkouts not installed)."""

import sys

from securefg.cli import console_main

sys.exit(console_main())
