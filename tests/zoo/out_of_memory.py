"""Tries: allocate more memory than any host has (on a GPU: raise torch.OutOfMemoryError, as a failed
CUDA allocation does).
Must get: rejected as one line starting "out of memory:"."""
import torch


def custom_kernel(data):
    q = data[0]
    if q.is_cuda:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 4.00 EiB")
    return torch.empty(1 << 62, dtype=torch.uint8)  # more than any host has: the allocation fails
