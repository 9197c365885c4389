"""Tries: fill the disk through its log (stdout), 10 MB per call without end.
Must get: its writes stop at the per-file limit (harness/launch.py LOG_LIMIT): the call fails
with an error, the log stays bounded."""
import sys

CHUNK = "x" * (10 << 20)


def custom_kernel(data):
    while True:
        sys.stdout.write(CHUNK)
