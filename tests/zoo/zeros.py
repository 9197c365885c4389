"""Tries: return zeros of the right shape and dtype, doing no work.
Must get: rejected: "output differs from the reference" (under the popcorn protocol: exit 112)."""
import torch


def custom_kernel(data):
    q = data[0]
    return torch.zeros(q.shape[0], q.shape[1], 512, dtype=torch.bfloat16, device=q.device)
