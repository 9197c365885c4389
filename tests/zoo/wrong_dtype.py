"""Tries: return the right values in fp32 instead of bf16.
Must get: rejected: "output dtype torch.float32, expected torch.bfloat16"."""
import reference


def custom_kernel(data):
    return reference.ref_kernel(data).float()  # right values, fp32 instead of bf16
