"""Tries: compute the right answer, then scribble over the KV cache it was given (data[1]["bf16"]).
Must get: rejected: "custom_kernel modified its input data[1]['bf16']"."""
import reference


def custom_kernel(data):
    out = reference.ref_kernel(data)
    data[1]["bf16"].zero_()  # scribble over the KV cache after computing
    return out
