"""Tries: divide every CUDA event interval by 10 (patches torch.cuda.Event.elapsed_time; GPU only);
the work itself is honest.
Must get: rejected: "timer function torch.cuda.Event.elapsed_time was replaced by the submission"."""
import reference
import torch

_elapsed = torch.cuda.Event.elapsed_time
torch.cuda.Event.elapsed_time = lambda self, end: _elapsed(self, end) / 10


def custom_kernel(data):
    return reference.ref_kernel(data)
