"""Tries: do the work after the timer stopped: the timed call returns at once, and the real
computation runs when the harness hands the output over (the successor of a lazy pickling reducer).
Must get: fenced, no gain: the work happens before the output is copied and DONE is signalled,
inside the parent's clock. Unfenced: rejected by the profiler's audit, which sees the work inside
the call's range."""
import reference
from harness.worker import timer

_call = timer.CallTimer.__call__


def late(self, fn, data, timed):
    out, timing = _call(self, lambda d: None, data, timed)  # times nothing
    return reference.ref_kernel(data), timing


timer.CallTimer.__call__ = late


def custom_kernel(data):
    return reference.ref_kernel(data)
