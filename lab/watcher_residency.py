"""What the DONE watcher's resident warp costs a kernel that fills every SM exactly (issue 37, acceptance
2: a penalty on an honest file is a false rejection too; docs/threat-model.md "Still open" (3)).

The fence's watcher (harness/parent/watcher.py) is placed on an SM before the call's first kernel and
stays there until DONE: one warp, its registers (32 per thread) taken from that SM for the whole call.
A kernel whose blocks are register-bound so that they use an SM's whole register file (here a Triton
kernel of 8 warps at 128 registers: two blocks per SM) finds one block's room less on the watcher's
SM; with a grid of exactly SMs x blocks-per-SM (a persistent kernel's one wave, as FlashMLA's
scheduler sizes it) one block must wait for another to end.

One process, no MPS, no fence: the kernel timed with CUDA events alone and with a watcher resident
(launched on another stream, polling a flag that is written only after the kernel), at grids of one
exact wave, one block less, and four waves. Prints the kernel's registers and a table: grid, median µs
alone, median µs beside the watcher, ratio.

Usage (GPU machine, repo root): python3 lab/watcher_residency.py [--calls 20] [--iters 400]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import triton
import triton.language as tl

WARPS, BLOCK = 8, 16384  # 64 fp32 values a thread: 128 registers on sm_90 (ptxas), two blocks an SM


@triton.jit
def _spin(x_ptr, n_iter, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    acc = offs.to(tl.float32) + pid
    for _ in range(n_iter):
        acc = acc * 1.0001 + 0.5
    tl.store(x_ptr + pid * BLOCK + offs, acc)


def _time(torch, launch, calls: int) -> list[float]:
    times = []
    for _ in range(calls):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(100_000)  # the kernel queues behind it: no launch gap is timed
        start.record()
        launch()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--iters", type=int, default=400)
    args = parser.parse_args()
    import torch

    from harness.api import watcher

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    x = torch.empty(sms * 8 * BLOCK, dtype=torch.float32, device="cuda")
    kernel = _spin[(1,)](x, 1, BLOCK=BLOCK, num_warps=WARPS)
    regs = kernel.n_regs
    per_sm = 65536 // (WARPS * 32 * ((regs + 7) // 8 * 8))
    print(f"{torch.cuda.get_device_name()}: {sms} SMs; the kernel: {WARPS} warps, {regs} registers, "
          f"{per_sm} blocks an SM by registers")
    watch = watcher.DoneWatcher()
    flag = torch.zeros(2, dtype=torch.int32, device="cuda")
    slot = torch.zeros(1024, dtype=torch.int32, device="cuda")
    side = torch.cuda.Stream()
    rows = []
    for grid in (sms * per_sm, sms * per_sm - 1, 4 * sms * per_sm):
        def launch(grid=grid):
            _spin[(grid,)](x, args.iters, BLOCK=BLOCK, num_warps=WARPS)
        alone = _time(torch, launch, args.calls)
        beside = []
        for _ in range(args.calls):
            flag.zero_()
            torch.cuda.synchronize()
            watch.launch(side, flag.data_ptr(), 1, slot, 1.0, flag.data_ptr() + 4)
            deadline = time.monotonic() + 1.0
            while int(flag[1].item()) != 1 and time.monotonic() < deadline:  # (a copy: another stream)
                time.sleep(1e-4)
            beside += _time(torch, launch, 1)
            flag[0].fill_(1)  # the watcher's DONE: it samples and leaves
            torch.cuda.synchronize()
        a, b = statistics.median(alone), statistics.median(beside)
        rows.append((grid, a, b))
    print(f"{'grid':>6} {'alone µs':>10} {'beside µs':>10} {'ratio':>6}")
    for grid, a, b in rows:
        print(f"{grid:>6} {a:>10.1f} {b:>10.1f} {b / a:>6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
