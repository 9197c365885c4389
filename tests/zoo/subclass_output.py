"""Tries: return the right answer as a torch.Tensor subclass, whose methods could lie to a checker
running in this process.
Must get: rejected: "output tensor is a subclass of torch.Tensor (Honest)"."""
import reference
import torch


class Honest(torch.Tensor):
    """A tensor subclass: its methods could lie to a checker running in this process."""


def custom_kernel(data):
    return reference.ref_kernel(data).as_subclass(Honest)
