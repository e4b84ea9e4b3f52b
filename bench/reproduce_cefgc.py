"""The CeFGC paper's comparison: a thin wrapper of ``securefg reproduce cefgc``.

Run: ``python bench/reproduce_cefgc.py [--quick] [--seeds ...] [--datasets ...] [--methods ...]``;
every argument goes to the subcommand (``python -m securefg reproduce cefgc --help``).
"""

from __future__ import annotations

import sys

from securefg.cli import main

if __name__ == "__main__":
    sys.exit(main(["reproduce", "cefgc", *sys.argv[1:]]))
