"""Tries: make every call look 10x faster by replacing the clock (the CPU timer, time.perf_counter; on a
GPU, the events' elapsed_time); the work itself is honest.
Must get: on the CPU, rejected: "timer function time.perf_counter was replaced by the submission"."""
import time

import reference
import torch

_real = time.perf_counter
_start = _real()
time.perf_counter = lambda: _start + (_real() - _start) / 10
if torch.cuda.is_available():
    _elapsed = torch.cuda.Event.elapsed_time
    torch.cuda.Event.elapsed_time = lambda self, end: _elapsed(self, end) / 10


def custom_kernel(data):
    return reference.ref_kernel(data)
