"""GPU check behind the timer's persisting-L2 reset (harness/worker/timer.py): does a cache whose
lines a submission marked persisting survive the timer's flush, and does the reset undo it?

For a few benchmark shapes it times, with the worker's CallTimer (flush, then events around one
call), the bundled bf16 kernel as it is and through tests/zoo_gpu/persists_in_l2.py (the same
kernel on a stream whose access-policy window marks the KV cache persisting), each with the
timer's reset and without it. Also the reset's own host time.

Usage (NVIDIA GPU machine, repo root):  python lab/l2_persist_check.py [--cases 0,1,2] [--calls 60]
Prints one table last: median µs per way, and the attack's ratio to the honest kernel.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.api import detect  # noqa: E402
from harness.api import load_problem  # noqa: E402
from harness.api import CallTimer  # noqa: E402
from lab.knob_sweep import load  # noqa: E402


def median_us(timer: CallTimer, fn, data, calls: int, reset: bool) -> float:
    saved = timer._reset_l2
    timer._reset_l2 = saved if reset else None
    try:
        return statistics.median(timer(fn, data, timed=True)[1]["device_s"] * 1e6 for _ in range(calls))
    finally:
        timer._reset_l2 = saved


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", default="0,1,2", help="benchmark case indices")
    parser.add_argument("--calls", type=int, default=60)
    args = parser.parse_args()

    info = detect("cuda")
    problem = load_problem(ROOT / "task.yml")
    honest = load(str(ROOT / "submissions" / "triton_bf16.py"), 0, {}).custom_kernel
    attack = load(str(ROOT / "tests" / "zoo_gpu" / "persists_in_l2.py"), 1, {}).custom_kernel
    timer = CallTimer("cuda", info.l2_bytes)
    if timer._reset_l2 is None:
        print("no cuCtxResetPersistingL2Cache on this machine: nothing to check")
        return 1
    torch.cuda.synchronize()
    samples = []
    for _ in range(200):
        start = time.perf_counter()
        timer._reset_l2()
        samples.append((time.perf_counter() - start) * 1e6)
    reset_us = statistics.median(samples)
    print(f"{info.describe()}, L2 {info.l2_bytes / 2**20:.0f} MiB; reset call {reset_us:.1f} µs host (median of 200)")

    rows = []
    for i in args.cases.split(","):
        case = problem.spec.cases("benchmark")[int(i)]
        label = problem.label(case.args)
        data = problem.generate(case.args, case.seed, info.torch_device)
        kv_mib = data[1]["bf16"].numel() * data[1]["bf16"].element_size() / 2**20
        for fn in (honest, attack):
            for _ in range(3):
                fn(data)
        torch.cuda.synchronize()
        # the order alternates so neither way always runs first after the other
        row = {}
        for way, fn, reset in (("honest, reset", honest, True), ("attack, no reset", attack, False),
                               ("attack, reset", attack, True), ("honest, no reset", honest, False)):
            row[way] = median_us(timer, fn, data, args.calls, reset)
        rows.append((label, kv_mib, row))
        del data
        torch.cuda.synchronize()
    print()
    print("| case | KV MiB | honest, reset µs | honest, no reset µs | attack, no reset µs | attack, reset µs "
          "| attack/honest, no reset | attack/honest, reset |")
    print("|---" * 8 + "|")
    for label, kv_mib, r in rows:
        print(f"| {label} | {kv_mib:.1f} | {r['honest, reset']:.2f} | {r['honest, no reset']:.2f} "
              f"| {r['attack, no reset']:.2f} | {r['attack, reset']:.2f} "
              f"| {r['attack, no reset'] / r['honest, no reset']:.3f} | {r['attack, reset'] / r['honest, reset']:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
