import sys

from harness.worker.loop import entry

entry(sys.argv[1:])
