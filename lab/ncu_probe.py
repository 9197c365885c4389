"""What Nsight Compute costs per kernel, and which processes a profiled process can see (device script).

Usage on the GPU machine: lab/ncu_sandbox_probe.py runs it under the audit's own ncu options,
with and without the worker's sandbox.
"""
import os
import subprocess
import sys
import time

import torch

# argv: kernels, then "async" (launched back to back), "sync" (a synchronize after each) or "twin"
# (back to back, with a second process holding a CUDA context under the same profiler)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    mode = sys.argv[2] if len(sys.argv) > 2 else "async"
    twin = None
    if mode == "twin":
        twin = subprocess.Popen([sys.executable, "-c", "import torch, time; torch.empty(1, device='cuda'); "
                                 "print('twin ready', flush=True); time.sleep(60)"], stdout=subprocess.PIPE)
        twin.stdout.readline()
    x = torch.ones(1 << 20, device="cuda")
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        x.add_(1)
        if mode == "sync":
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    print(f"{n} small kernels ({mode}): {time.perf_counter() - start:.2f} s", file=sys.stderr)
    if twin is not None:
        twin.kill()
    seen = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            seen.append(open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")[0].decode(errors="replace").rsplit("/", 1)[-1])
        except OSError:
            pass
    print(f"processes in sight: {' '.join(seen)[:200]}", file=sys.stderr)


if __name__ == "__main__":
    main()
