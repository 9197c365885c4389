"""Tries: make the parent allocate memory it never checked: a reply announcing 3 GiB.
Must get: rejected as a malformed message at once; the parent's memory does not grow."""
import os
import stat
import struct


def custom_kernel(data):
    for fd in range(3, 64):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                os.write(fd, struct.pack("!I", 3 << 30) + b"{" * 65536)
        except OSError:
            pass
    raise SystemExit(0)
