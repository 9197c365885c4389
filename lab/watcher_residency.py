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

With --mps PCT ..., under an MPS daemon the calling shell started (lab/h200_setup.sh, start_mps), the
kernel runs in a second process, an MPS client limited to PCT% of the GPU's threads
(CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, as the parent could set for a worker), its grids sized to the SMs
that client is told it has, while this process (unlimited) holds the watcher: does a client kept one
SM short of the GPU still lose a block's room beside the watcher (the limit caps how many SMs it uses,
not which)? Prints, per PCT, the SMs the client sees and the same table.

Usage (GPU machine, repo root): python3 lab/watcher_residency.py [--calls 20] [--iters 400] [--mps 100 99]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
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


def _kernel(torch) -> tuple:
    """(the SMs this process is told it has, the kernel's output buffer, the kernel's registers, its
    blocks an SM by registers), the kernel compiled."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    regs = _spin[(1,)](torch.empty(BLOCK, device="cuda"), 1, BLOCK=BLOCK, num_warps=WARPS).n_regs
    per_sm = 65536 // (WARPS * 32 * ((regs + 7) // 8 * 8))
    return sms, torch.empty(max(_grids(sms, per_sm)) * BLOCK, device="cuda"), regs, per_sm


def _grids(sms: int, per_sm: int) -> tuple[int, int, int]:
    return sms * per_sm, sms * per_sm - 1, 4 * sms * per_sm


class _Watcher:
    """The watcher held resident on a side stream of this process until `leave`."""

    def __init__(self, torch):
        from harness.api import watcher

        self.torch, self.watch = torch, watcher.DoneWatcher()
        self.flag = torch.zeros(2, dtype=torch.int32, device="cuda")
        self.slot = torch.zeros(1024, dtype=torch.int32, device="cuda")
        self.side = torch.cuda.Stream()

    def hold(self, limit_s: float = 1.0) -> None:
        self.flag.zero_()
        self.torch.cuda.synchronize()
        self.watch.launch(self.side, self.flag.data_ptr(), 1, self.slot, limit_s, self.flag.data_ptr() + 4)
        deadline = time.monotonic() + limit_s
        while int(self.flag[1].item()) != 1 and time.monotonic() < deadline:  # (a copy: another stream)
            time.sleep(1e-4)

    def leave(self) -> None:
        self.flag[0].fill_(1)  # the watcher's DONE: it samples and leaves
        self.torch.cuda.synchronize()


def _table(rows) -> None:
    print(f"{'grid':>6} {'alone µs':>10} {'beside µs':>10} {'ratio':>6}")
    for grid, a, b in rows:
        print(f"{grid:>6} {a:>10.1f} {b:>10.1f} {b / a:>6.2f}")


def _child(args) -> int:
    """The MPS client's side of --mps: its SMs, then per grid its alone median, "ready", and on "go"
    (the other process's watcher resident) its beside median."""
    import torch

    sms, x, _, per_sm = _kernel(torch)
    print(sms, flush=True)
    for grid in _grids(sms, per_sm):
        def launch(grid=grid):
            _spin[(grid,)](x, args.iters, BLOCK=BLOCK, num_warps=WARPS)
        alone = statistics.median(_time(torch, launch, args.calls))
        print("ready", flush=True)
        sys.stdin.readline()
        print(grid, alone, statistics.median(_time(torch, launch, args.calls)), flush=True)
    return 0


def _across(held: _Watcher, pct: int, args) -> None:
    env = dict(os.environ, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=str(pct))
    child = subprocess.Popen([sys.executable, __file__, "--child", "--calls", str(args.calls), "--iters",
                              str(args.iters)], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    print(f"MPS client at {pct}%: told {child.stdout.readline().strip()} SMs")
    rows = []
    for line in child.stdout:
        if line.startswith("ready"):
            held.hold(limit_s=2.0)
            child.stdin.write("go\n")
            child.stdin.flush()
        else:
            held.leave()
            grid, a, b = line.split()
            rows.append((int(grid), float(a), float(b)))
    child.wait(timeout=60)
    _table(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--iters", type=int, default=400)
    parser.add_argument("--mps", type=int, nargs="*", default=[], metavar="PCT")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return _child(args)
    import torch

    sms, x, regs, per_sm = _kernel(torch)
    print(f"{torch.cuda.get_device_name()}: {sms} SMs; the kernel: {WARPS} warps, {regs} registers, "
          f"{per_sm} blocks an SM by registers")
    held = _Watcher(torch)
    if args.mps:
        for pct in args.mps:
            _across(held, pct, args)
        return 0
    rows = []
    for grid in _grids(sms, per_sm):
        def launch(grid=grid):
            _spin[(grid,)](x, args.iters, BLOCK=BLOCK, num_warps=WARPS)
        alone = _time(torch, launch, args.calls)
        beside = []
        for _ in range(args.calls):
            held.hold()
            beside += _time(torch, launch, 1)
            held.leave()
        rows.append((grid, statistics.median(alone), statistics.median(beside)))
    _table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
