"""Tries: return half the value dims (256 of 512).
Must get: rejected: "output shape (2, 16, 256), expected (2, 16, 512)" (the first small test case)."""
def custom_kernel(data):
    q = data[0]
    return q[..., :256].clone()  # half the value dims
