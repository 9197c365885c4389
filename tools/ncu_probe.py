"""What Nsight Compute costs per kernel, and which processes a profiled process can see (device script).

Usage on the GPU machine: tools/ncu_sandbox_probe.py runs it under the audit's own ncu options,
with and without the worker's sandbox.
"""
import os
import sys
import time

import torch

x = torch.ones(1 << 20, device="cuda")
torch.cuda.synchronize()
n = int(sys.argv[1]) if len(sys.argv) > 1 else 100
start = time.perf_counter()
for _ in range(n):
    x.add_(1)
torch.cuda.synchronize()
print(f"{n} small kernels: {time.perf_counter() - start:.2f} s", file=sys.stderr)
seen = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        seen.append(open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")[0].decode(errors="replace").rsplit("/", 1)[-1])
    except OSError:
        pass
print(f"processes in sight: {' '.join(seen)[:200]}", file=sys.stderr)
