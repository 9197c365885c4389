"""Tries: fill the host's disk through its log without making it any bigger: fallocate with
FALLOC_FL_KEEP_SIZE on its standard output reserves disk blocks past the end of the file, which
the file-size limit (RLIMIT_FSIZE) does not count, and they stay reserved after the run (logs
are kept). 256 MiB here; the whole free disk takes one call as well.
Must get: its output is a pipe, not a file (fallocate fails); the log file holds only what it
printed; it computes the right answer, so it passes."""
import ctypes
import os

import reference

libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
for fd in (1, 2):
    rc = libc.fallocate(fd, 1, 0, 256 << 20)  # 1: FALLOC_FL_KEEP_SIZE
    print(f"fallocate on {fd}: {rc} ({os.strerror(ctypes.get_errno()) if rc else 'reserved'})", flush=True)


def custom_kernel(data):
    return reference.ref_kernel(data)
