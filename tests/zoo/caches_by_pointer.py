"""Tries: cache answers by the inputs' data pointers (the harness reuses its input buffers between
calls) and replay them.
Must get: in benchmark mode, rejected: "timed call 1: output differs from the reference"."""
import reference

_cache = {}


def custom_kernel(data):
    key = (data[0].data_ptr(), data[1]["bf16"].data_ptr())
    if key not in _cache:
        _cache[key] = reference.ref_kernel(data)
    return _cache[key].clone()
