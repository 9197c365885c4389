"""Tries: write a profiler report of its own into the profiler's output (its standard output,
reached through /proc/<profiler>/fd/1 inside the audit's sandbox): a header and one tiny kernel
per line, so the parent would read small GPU times, and report a tenth of each call's time.
Must get: rejected (the report is read strictly: a second header or kernel IDs out of order fail
the audit; the real kernels still count)."""
import os

import reference
from harness.worker import timer

_call = timer.CallTimer.__call__
timer.CallTimer.__call__ = lambda self, fn, data, timed: (lambda out, t: (out, {**t, "device_s": t["device_s"] / 10}))(
    *_call(self, fn, data, timed))
HEADER = '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","gpu__time_duration.sum"\n'
_written = 0


def custom_kernel(data):
    global _written
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if b"ncu" not in open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")[0]:
                continue
            with open(f"/proc/{pid}/fd/1", "w") as report:
                report.write((HEADER if not _written else "") + f'"{_written}","{os.getpid()}","p","h","k","1","1"\n')
                _written += 1
        except OSError:
            pass
    return reference.ref_kernel(data)
