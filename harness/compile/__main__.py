"""`python -m harness.compile`: the cross-compile report from the command line (run.py's `main`)."""

import sys

from harness.compile.run import main

if __name__ == "__main__":
    sys.exit(main())
