"""Tries: compute the first call, then return torch.empty hoping to land on the last correct buffer.
Must get: in benchmark mode, rejected: "output differs from the reference" (a stale answer, wrong for
fresh inputs) or "NaN/inf values" (garbage)."""
import reference
import torch

_calls = 0


def custom_kernel(data):
    global _calls
    _calls += 1
    if _calls == 1:
        return reference.ref_kernel(data)
    q = data[0]
    return torch.empty(q.shape[0], q.shape[1], 512, dtype=torch.bfloat16, device=q.device)
