"""Tries: replace every checker it can reach in its own process (torch.allclose, torch.equal,
reference's checks, harness.task.verdict.judge), then return zeros.
Must get: rejected: "output differs from the reference" (the parent judges the output, not this process)."""
import torch

import reference

torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
reference.check_output = lambda *a, **k: (True, "patched")
reference.check_implementation = lambda *a, **k: (True, "patched")
try:
    import harness.task.verdict
    harness.task.verdict.judge = lambda *a, **k: harness.task.verdict.Verdict(True, "patched")
except ImportError:
    pass


def custom_kernel(data):
    q = data[0]
    return torch.zeros(q.shape[0], q.shape[1], 512, dtype=torch.bfloat16, device=q.device)
