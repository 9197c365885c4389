"""Tries: report a time it did not spend: patches the worker's timer to report 1 µs per call and
the channel to shrink every number it sends, while each call really takes 30 ms.
Must get: on the CPU, no effect: the recorded times are the parent's own clock (at least 30 ms). On a
GPU the profiler's audit rejects it (tests/zoo_gpu/forges_timer.py)."""
import time

import reference
from harness.worker.channel import Channel
from harness.worker import timer

_timer_call = timer.CallTimer.__call__
_send = Channel.send


def fast_timer(self, fn, data, timed):
    out, timing = _timer_call(self, fn, data, timed)
    return out, {**timing, "device_s": 1e-6, "host_s": 1e-6}


def shrinking_send(self, message, fds=()):
    if isinstance(message, dict) and "device_s" in message:
        message = {**message, "device_s": 1e-6, "host_s": 1e-6}
    return _send(self, message, fds)


timer.CallTimer.__call__ = fast_timer
Channel.send = shrinking_send


def custom_kernel(data):
    time.sleep(0.03)
    return reference.ref_kernel(data)
