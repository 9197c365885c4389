"""How often two roundings of q's fp8 scale give different q codes, on the task's own inputs (CPU).

The precision contract quantizes q per tensor with scale = amax / 448. On CUDA, torch computes
harness.task.quant.quantize_fp8's `amax / fp8_max` (a CPU scalar divisor) as amax * fp32(1 / 448); the
correctly rounded quotient can be 1 ulp away. For some amax values q / scale then lands on e4m3
rounding ties, and the codes of a kernel using the other rounding differ from the reference's.
This emulates both on the CPU for the q of each seed (generate_input draws q first, so a short
cache gives the same q as the benchmark case) and counts the seeds whose codes differ.

Usage (repo root):
    python lab/fp8_scale_emulation.py --batch 4 --seeds 200
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import reference  # noqa: E402

FP8 = torch.float8_e4m3fn
RECIPROCAL = torch.tensor([1.0], dtype=torch.float32) / torch.tensor([448.0], dtype=torch.float32)


def codes(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return (q.float() / scale).clamp(-448.0, 448.0).to(FP8).view(torch.uint8)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--first-seed", type=int, default=1000)
    args = parser.parse_args()
    torch.set_num_threads(2)
    differ = 0
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        q = reference.generate_input(args.batch, 1, 32, seed, device="cpu")[0]
        amax = q.abs().amax().float().clamp(min=1e-12).reshape(1)
        as_cuda = amax * RECIPROCAL                                  # the reference on a GPU
        rounded = (amax.double() / 448.0).float()                    # the correctly rounded quotient
        flips = (codes(q, as_cuda) != codes(q, rounded)).float().mean().item()
        if flips > 1e-3:
            differ += 1
            print(f"seed {seed}: amax {float(amax):g}, scales {float(as_cuda):.9g} / {float(rounded):.9g}, "
                  f"{flips:.2%} of q codes differ")
    print(f"batch {args.batch}: {differ} of {args.seeds} seeds with more than 0.1% of q codes differing")
    return 0


if __name__ == "__main__":
    sys.exit(main())
