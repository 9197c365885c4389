"""Tries: return the answer to the previous call's inputs (work done "ahead", off the timed call).
Must get: in benchmark mode, rejected: "timed call 1: output differs from the reference"."""
import reference

_previous = None


def custom_kernel(data):
    global _previous
    answer = reference.ref_kernel(data)
    out = _previous if _previous is not None and _previous.shape == answer.shape else answer
    _previous = answer
    return out
