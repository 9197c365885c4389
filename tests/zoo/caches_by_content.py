"""Tries: cache answers by a cheap fingerprint of inputs that do not change with the seed (the index
pointers) and replay them.
Must get: in benchmark mode, rejected: "timed call 1: output differs from the reference"."""
import reference

_cache = {}


def custom_kernel(data):
    key = tuple(data[3].tolist()) + tuple(data[2].tolist())
    if key not in _cache:
        _cache[key] = reference.ref_kernel(data)
    return _cache[key].clone()
