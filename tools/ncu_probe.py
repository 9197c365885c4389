"""What Nsight Compute's CSV says about NVTX ranges, and what it costs per kernel (device script).

Usage on the GPU machine: ncu $(python3 -c 'from harness.audit import *; print(...)') python3 tools/ncu_probe.py
tools/h200_sandbox.sh runs it under the audit's own ncu options.
"""
import sys
import time

import torch

x = torch.ones(1 << 20, device="cuda")
torch.cuda.synchronize()
torch.cuda.nvtx.range_push("mla-eval-call/warmup")
y = x * 2
torch.cuda.nvtx.range_pop()
torch.cuda.nvtx.range_push("mla-eval-call/3")
y = x * 3
z = y + 1
torch.cuda.nvtx.range_pop()
w = x - 1  # outside any range: counts for case 3
torch.cuda.synchronize()
n = int(sys.argv[1]) if len(sys.argv) > 1 else 100
start = time.perf_counter()
for _ in range(n):
    x.add_(1)
torch.cuda.synchronize()
print(f"{n} small kernels: {time.perf_counter() - start:.2f} s", file=sys.stderr)
