"""Tries: fill the disk through its log (stdout), 10 MB per call without end.
Must get: the parent keeps at most LOG_LIMIT bytes of its output (harness/parent/launch.py; the log is a
pipe the parent copies, with a closing line where it was cut), then closes the pipe: the next
write fails ("Broken pipe"), the call fails with that error, the log stays bounded."""
import sys

CHUNK = "x" * (10 << 20)


def custom_kernel(data):
    while True:
        sys.stdout.write(CHUNK)
