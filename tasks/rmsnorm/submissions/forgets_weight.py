"""A wrong RMSNorm (the weight is left out): the second task's check must reject it."""
import torch


def custom_kernel(data):
    x, weight, eps = data
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
