"""``python -m patcher.cli``: the command line, as the console script runs it."""

import sys

from patcher.cli.parser import main

if __name__ == "__main__":
    sys.exit(main())
