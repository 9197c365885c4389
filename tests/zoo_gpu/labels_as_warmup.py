"""Tries: pop the harness's NVTX range around each call and label all its work as the warm-up of
case 0 (which the audit does not count), and report a tenth of each call's time.
Must get: rejected by the audit (no audited call shows a kernel of its own). A variant that keeps
one small kernel inside each call's range is not caught: the ranges come from the worker's own
process (harness/parent/audit.py, docs/threat-model.md)."""
import torch

import reference
from harness.worker import timer

_call = timer.CallTimer.__call__
timer.CallTimer.__call__ = lambda self, fn, data, timed: (lambda out, t: (out, {**t, "device_s": t["device_s"] / 10}))(
    *_call(self, fn, data, timed))


def custom_kernel(data):
    for _ in range(4):  # leave whatever range the caller pushed
        torch.cuda.nvtx.range_pop()
    torch.cuda.nvtx.range_push("mla-eval-call/warmup/0")
    try:
        return reference.ref_kernel(data)
    finally:
        torch.cuda.nvtx.range_pop()
