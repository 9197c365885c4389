"""Tries: return a view of its input q with the right answer written into q's memory.
Must get: rejected: "output tensor shares memory with an input tensor"."""
import reference


def custom_kernel(data):
    q = data[0]
    out = reference.ref_kernel(data)
    view = q.view(-1)[: out.numel()].view(out.shape)  # write the answer into q's memory
    view.copy_(out)
    return view
