"""Tries: replace torch.cuda.Event with a class whose elapsed_time is always tiny (GPU only); the work
itself is honest.
Must get: rejected: "timer function torch.cuda.Event was replaced by the submission"."""
import reference
import torch


class FastEvent(torch.cuda.Event):
    def elapsed_time(self, end):
        return 0.001


torch.cuda.Event = FastEvent


def custom_kernel(data):
    return reference.ref_kernel(data)
