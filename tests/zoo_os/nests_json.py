"""Tries: crash the parent's reader with a reply nested a million levels deep (JSON that is
valid up to its end, but no parser's recursion survives it).
Must get: a protocol failure for this submission only; the parent goes on."""
import os
import stat
import struct

BOMB = b"[" * 500_000 + b"]" * 500_000


def custom_kernel(data):
    for fd in range(3, 64):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                os.write(fd, struct.pack("!I", len(BOMB)) + BOMB)
        except OSError:
            pass
    raise SystemExit(0)
