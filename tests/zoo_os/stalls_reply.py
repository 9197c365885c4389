"""Tries: block the parent forever by writing the first bytes of a reply into its own channel
and then never finishing it (or answering at all).
Must get: a timeout at the case's deadline; the run goes on and completes."""
import os
import stat
import time


def custom_kernel(data):
    for fd in range(3, 64):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                os.write(fd, b"\x00\x00")  # half of a length header
        except OSError:
            pass
    time.sleep(3600)
