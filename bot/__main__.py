"""``python -m bot``: the same command line as ``companion``."""

import sys

from .cli import main

if __name__ == "__main__":  # guarded: the benchmark spawns processes that re-import the main module
    sys.exit(main())
