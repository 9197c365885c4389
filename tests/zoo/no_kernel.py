"""Tries: define its function under another name (kernel, not custom_kernel).
Must get: rejected: "defines no custom_kernel"."""
def kernel(data):
    return data[0]
