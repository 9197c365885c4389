"""Tries: answer honestly for the first calls (warm-up, the correctness check), then return zeros once
it thinks timing started.
Must get: in benchmark mode, rejected: "output differs from the reference"."""
import reference
import torch

_calls = 0


def custom_kernel(data):
    global _calls
    _calls += 1
    if _calls <= 4:
        return reference.ref_kernel(data)
    q = data[0]
    return torch.zeros(q.shape[0], q.shape[1], 512, dtype=torch.bfloat16, device=q.device)
