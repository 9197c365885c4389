"""Tries: raise ValueError("kernel not implemented for this shape") from a call.
Must get: "exception: ValueError: kernel not implemented for this shape", as one line."""
def custom_kernel(data):
    raise ValueError("kernel not implemented for this shape")
