"""Tries: look through gc and the caller frames for an expected output to hand back. (Its own output
slot, which the parent zeroes before every call, is the one tensor of that shape it may see.)
Must get: it finds none ("found 0 candidate tensors" in its log), returns zeros, and is rejected:
"output differs from the reference"."""
import gc
import inspect

import torch


def custom_kernel(data):
    q = data[0]
    shape = (q.shape[0], q.shape[1], 512)
    found = [o for o in gc.get_objects() if isinstance(o, torch.Tensor) and tuple(o.shape) == shape]
    for frame_info in inspect.stack():
        for value in frame_info.frame.f_locals.values():
            if isinstance(value, torch.Tensor) and tuple(value.shape) == shape:
                found.append(value)
    found = [t for t in found if bool(t.float().abs().sum() > 0)]
    print(f"walks_gc: found {len(found)} candidate tensors of the output shape")
    if found:
        return found[0].to(torch.bfloat16).clone()
    return torch.zeros(shape, dtype=torch.bfloat16, device=q.device)
