#!/usr/bin/env python3
"""Evaluate MLA decode kernels: `python eval.py --mode test|benchmark|leaderboard|profile`.

A thin entry point; the engine lives in harness/ (see README.md).
"""

import sys

from harness.cli import main

if __name__ == "__main__":
    sys.exit(main())
