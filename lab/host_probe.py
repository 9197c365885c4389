"""Host time of one call of a bundled file, in one process (GPU): what issue 16's "host time per
call under 30 µs for one-launch calls" is about.

For each named benchmark case: the CPU wall time of `custom_kernel(data)` from call to return,
median of --calls calls, two ways: back to back (no synchronisation between calls; the GPU queue
keeps the launches from waiting on the GPU) and after a synchronisation (each call starts with the
GPU idle). The first calls (plan, compile) are left out. Also the number of kernel launches of
one call (torch.profiler), so one-launch calls can be told apart, and the file's own share: the
same call with its `_launch` replaced by the argument specialization it computes (no Triton, no
kernel), back to back.

Usage (GPU machine, repo root):
    python lab/host_probe.py submissions/triton_mxfp4.py --cases 6,7 [--calls 200] [--config '{...}']
Prints one markdown row per case.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from harness.api import detect  # noqa: E402
from harness.api import load_problem  # noqa: E402
from lab.knob_sweep import load, parse_config  # noqa: E402


def host_times(fn, data, calls: int, sync: bool) -> list[float]:
    times = []
    for _ in range(calls):
        if sync:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn(data)
        times.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return times


def launches(fn, data) -> int:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn(data)
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("submission")
    parser.add_argument("--cases", default="0,6,7")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--config", default="{}", help="knob overrides, as lab/knob_sweep.py takes them")
    args = parser.parse_args()
    info = detect("cuda")
    problem = load_problem(ROOT / "task.yml")
    module = load(args.submission, 0, parse_config(args.config))
    fn = module.custom_kernel
    print(f"{Path(args.submission).name} {args.config}, {info.describe()}, median of {args.calls} calls")
    print("| case | kernels per call | host µs back to back | host µs after a sync | without the launches |")
    print("|---|---|---|---|---|")
    for index in map(int, args.cases.split(",")):
        case = problem.spec.cases("benchmark")[index]
        data = problem.generate(case.args, case.seed, info.torch_device)
        for _ in range(5):
            fn(data)
        kernels = launches(fn, data)
        b2b = statistics.median(host_times(fn, data, args.calls, sync=False))
        synced = statistics.median(host_times(fn, data, args.calls, sync=True))
        launch = module._launch
        module._launch = lambda plan, kernel, grid, a, constexprs, options: [module._specialization(x) for x in a]
        own = statistics.median(host_times(fn, data, args.calls, sync=False))
        module._launch = launch
        print(f"| {problem.label(case.args)} | {kernels} | {b2b:.1f} | {synced:.1f} | {own:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
