"""Tries: patch the worker's own timer (harness/worker/timer.py) to report a tenth of every
call's device time; the work itself is honest.
Must get: fenced (the default on NVIDIA with MPS), no effect: the number that ranks is the parent's
clock, and the fenced path does not go through this timer. Unfenced: rejected by the profiler's
audit (timed median below the profiler's GPU time per call)."""
import reference
from harness.worker import timer

_call = timer.CallTimer.__call__


def tenth(self, fn, data, timed):
    out, timing = _call(self, fn, data, timed)
    return out, {**timing, "device_s": timing["device_s"] / 10}


timer.CallTimer.__call__ = tenth


def custom_kernel(data):
    return reference.ref_kernel(data)
