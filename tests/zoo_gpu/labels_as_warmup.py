"""Tries: label its work with NVTX ranges named like a harness's warm-up marks (as an audit that
told calls apart by ranges the worker pushes would exclude them), and report a tenth of each
call's time.
Must get: rejected by the audit (calls are cut by the marker process's kernels, not by labels)."""
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
