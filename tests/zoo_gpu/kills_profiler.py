"""Tries: kill every other process it can see on each call: in the audit's sandbox those are the
profiler and the marker, so the audit would see no calls (and, were that taken as "nothing to
check", the forged timer below would stand). The timer reports a tenth of each call's time.
Must get: rejected (the audit fails: the marker or the profiler is gone)."""
import os
import signal

import reference
from harness.worker import timer

_call = timer.CallTimer.__call__
timer.CallTimer.__call__ = lambda self, fn, data, timed: (lambda out, t: (out, {**t, "device_s": t["device_s"] / 10}))(
    *_call(self, fn, data, timed))


def custom_kernel(data):
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) not in (os.getpid(), 1):
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass
    return reference.ref_kernel(data)
