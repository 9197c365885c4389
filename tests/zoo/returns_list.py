"""Tries: return a Python list instead of a tensor.
Must get: rejected: "custom_kernel returned list, expected a torch.Tensor"."""
def custom_kernel(data):
    return [0.0]
