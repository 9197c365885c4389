"""GPU experiment behind the harness's timing method (issue 7): is the flushed, launch-hidden event
interval the GPU's cold-cache time of the call?

For one submission and a few benchmark shapes it measures the same call five ways:

  harness    the harness's CallTimer: L2 flush + busy writes sized to the host time, events
             around one call (what every leaderboard number is)
  rotated    no flush at all: K independent input sets whose total size exceeds 3x L2, called
             back to back between two events after a busy prefix that covers all K launches;
             per call = interval / K. Every call reads data L2 cannot hold: the cold-cache truth.
  no_flush   as rotated, but all K calls on the same input set (warm L2 after the first call)
  graph      the call captured once in a CUDA graph; each replay after an L2 flush, events around it
  kernels    torch.profiler's sum of the call's kernel durations (no gaps between its kernels)

Usage (GPU machine, repo root):
    python tools/timing_experiments.py submissions/triton_bf16.py [--cases 0,1,5] [--out FILE]
Prints one table (median µs per method, and each method's ratio to `rotated`).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.device import detect  # noqa: E402
from harness.problem import load_problem  # noqa: E402
from harness.timing import CallTimer  # noqa: E402


def load_submission(path: str):
    spec = importlib.util.spec_from_file_location("submission", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.custom_kernel


def input_bytes(data) -> int:
    total = 0
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, torch.Tensor):
            total += item.numel() * item.element_size()
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    return total


def back_to_back(fn, inputs, buffer, busy_writes, reps):
    """Median per-call time of len(inputs) calls queued behind busy writes, between two events."""
    per_call = []
    for _ in range(reps):
        torch.cuda.synchronize()
        for _ in range(busy_writes):
            buffer.zero_()
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        for data in inputs:
            fn(data)
        end.record()
        end.synchronize()
        per_call.append(begin.elapsed_time(end) * 1e3 / len(inputs))
    return statistics.median(per_call)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("submission")
    parser.add_argument("--cases", default="0,2,5", help="benchmark case indices")
    parser.add_argument("--calls", type=int, default=100)
    args = parser.parse_args()

    info = detect("cuda")
    problem = load_problem(ROOT / "task.yml")
    fn = load_submission(args.submission)
    timer = CallTimer("cuda", info.l2_bytes)
    print(f"{info.describe()}, L2 {info.l2_bytes / 2**20:.0f} MiB, flush (2x L2 write) {timer.flush_s * 1e6:.1f} µs")
    rows = []
    for index in (int(i) for i in args.cases.split(",")):
        case = problem.spec.cases("benchmark")[index]
        label = problem.label(case.args)
        data = problem.generate(case.args, case.seed, info.torch_device)
        for _ in range(3):
            fn(data)
        torch.cuda.synchronize()

        # 1. the harness's method
        device, host = [], []
        for _ in range(args.calls):
            _, t = timer(fn, data, timed=True)
            device.append(t.device_s * 1e6)
            host.append(t.host_s * 1e6)
        harness_us, host_us = statistics.median(device), statistics.median(host)

        # 2./3. rotated buffers and no flush, back to back behind busy writes covering every launch
        k = max(3, -(-3 * info.l2_bytes // input_bytes(data)))
        k = min(k, 64)
        rotated = [problem.generate(case.args, case.seed + 1 + i, info.torch_device) for i in range(k)]
        busy = 2 + int(2.0 * k * host_us * 1e-6 / timer.flush_s)
        rotated_us = back_to_back(fn, rotated, timer.buffer, busy, reps=15)
        warm_us = back_to_back(fn, [data] * k, timer.buffer, busy, reps=15)
        del rotated

        # 4. CUDA graph replays after a flush
        graph_us = float("nan")
        try:
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                fn(data)
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                fn(data)
            replays = []
            for _ in range(args.calls):
                torch.cuda.synchronize()
                timer.buffer.zero_()
                timer.buffer.zero_()
                begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                begin.record()
                graph.replay()
                end.record()
                end.synchronize()
                replays.append(begin.elapsed_time(end) * 1e3)
            graph_us = statistics.median(replays)
        except Exception as exc:  # not capturable: report and go on
            print(f"{label}: graph capture failed: {type(exc).__name__}: {exc}")

        # 5. kernel durations from the profiler, with the harness's flush before each call
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(20):
                timer(fn, data, timed=True)
            torch.cuda.synchronize()
        kernel_us = sum(e.device_time_total for e in prof.key_averages()
                        if "zero" not in e.key.lower() and "fill" not in e.key.lower()
                        and e.device_time_total > 0) / 20
        # host time of a call with the GPU idle
        torch.cuda.synchronize()
        idle_host = []
        for _ in range(50):
            torch.cuda.synchronize()
            start = time.perf_counter()
            fn(data)
            idle_host.append((time.perf_counter() - start) * 1e6)
        rows.append((label, k, harness_us, rotated_us, warm_us, graph_us, kernel_us, host_us,
                     statistics.median(idle_host)))
        torch.cuda.synchronize()

    print()
    print("| case | K sets | harness µs | rotated µs | no-flush µs | graph µs | kernels µs (profiler) "
          "| harness / rotated | no-flush / rotated | host µs (timed) | host µs (GPU idle) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for label, k, h, r, w, g, kern, host_us, idle in rows:
        print(f"| {label} | {k} | {h:.1f} | {r:.1f} | {w:.1f} | {g:.1f} | {kern:.1f} | {h / r:.3f} "
              f"| {w / r:.3f} | {host_us:.0f} | {idle:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
