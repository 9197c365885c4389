"""GPU experiment behind the harness's timing method (issue 7): is the flushed, launch-hidden event
interval the GPU's cold-cache time of the call?

For one submission and a few benchmark shapes it measures the same call five ways:

  harness      the harness's CallTimer (busy writes of 2x L2 sized to the host time, then one
               read of that buffer so L2 holds clean lines), events around one call: what every
               leaderboard number is
  write-only   the same without the final read (L2 left full of dirty lines)
  rotated      no flush: each call reads one of K input sets totalling over 3x L2 in turn, so
               its data cannot be in L2. A burst of calls (at least 24, the K sets in turn) is
               queued, each call between its own pair of events, behind busy writes long enough
               to cover the host time of all its launches (checked: the busy work is still
               running when the last call is queued; a warning says otherwise). Each call
               is timed exactly as the harness times it (events around one call, launches
               queued ahead), with rotation instead of a flush making it cold.
  no-flush     as rotated, but always the same input set (warm after its first call)
  rotated b2b  the K rotated calls back to back between two events; interval / K (no events
               between calls: the next call's first kernel starts as soon as the last ends)
  graph        the call captured once in a CUDA graph; each replay behind the harness's flush
  kernels      torch.profiler's sum of the call's kernel durations (no gaps between its kernels)

Usage (GPU machine, repo root):
    python lab/timing_experiments.py submissions/triton_bf16.py [--cases 0,1,5] [--out FILE]
Prints one table (median µs per method, and ratios to the two rotated references).
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
from harness.api import CallTimer, capture_graph  # noqa: E402
from harness.api import tensors  # noqa: E402
from lab.knob_sweep import load  # noqa: E402


def input_bytes(data) -> int:
    return sum(t.numel() * t.element_size() for _, t in tensors(data))


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


def per_call_burst(fn, inputs, buffer, busy_writes, reps):
    """Median time of one call between its own two events, for len(inputs) calls queued in a row
    behind busy writes; also whether every burst was fully queued before the busy work ended."""
    times, queued_ahead = [], True
    for _ in range(reps):
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in inputs]
        busy_end = torch.cuda.Event()
        torch.cuda.synchronize()
        for _ in range(busy_writes):
            buffer.zero_()
        busy_end.record()
        for (begin, end), data in zip(events, inputs):
            begin.record()
            fn(data)
            end.record()
        queued_ahead &= not busy_end.query()  # still busy: no call's launch was waited for
        events[-1][1].synchronize()
        times += [begin.elapsed_time(end) * 1e3 for begin, end in events]
    return statistics.median(times), queued_ahead


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("submission")
    parser.add_argument("--cases", default="0,2,5", help="benchmark case indices")
    parser.add_argument("--calls", type=int, default=60)
    args = parser.parse_args()

    info = detect("cuda")
    problem = load_problem(ROOT / "task.yml")
    fn = load(args.submission, 0, {}).custom_kernel
    timer = CallTimer("cuda", info.l2_bytes)
    print(f"{info.describe()}, L2 {info.l2_bytes / 2**20:.0f} MiB, flush (2x L2 write) {timer.flush_s * 1e6:.1f} µs")
    rows = [measure_case(problem, problem.spec.cases("benchmark")[int(i)], fn, info, timer, args.calls)
            for i in args.cases.split(",")]
    print()
    print("| case | K sets | harness µs | write-only µs | rotated µs | no-flush µs | rotated b2b µs | graph µs "
          "| kernels µs | harness / rotated | harness / rotated b2b | no-flush / rotated | host µs (timed) "
          "| host µs (GPU idle) |")
    print("|---" * 14 + "|")
    for label, k, h, wo, r, w, b2b, g, kern, host_us, idle in rows:
        print(f"| {label} | {k} | {h:.1f} | {wo:.1f} | {r:.1f} | {w:.1f} | {b2b:.1f} | {g:.1f} | {kern:.1f} "
              f"| {h / r:.3f} | {h / b2b:.3f} | {w / r:.3f} | {host_us:.0f} | {idle:.0f} |")
    return 0


def measure_case(problem, case, fn, info, timer, calls: int) -> tuple:
    """One table row: the case timed every way this script compares."""
    label = problem.label(case.args)
    data = problem.generate(case.args, case.seed, info.torch_device)
    for _ in range(3):
        fn(data)
    torch.cuda.synchronize()

    # 1. the harness's method, and without its final read
    device, host = [], []
    for _ in range(calls):
        _, t = timer(fn, data, timed=True)
        device.append(t["device_s"] * 1e6)
        host.append(t["host_s"] * 1e6)
    harness_us, host_us = statistics.median(device), statistics.median(host)
    write_timer = CallTimer("cuda", info.l2_bytes, flush="write")
    write_only_us = statistics.median([write_timer(fn, data, timed=True)[1]["device_s"] * 1e6 for _ in range(calls)])

    # 2./3. rotated input sets (cold) and one input set (warm), one call between events,
    # all calls of a burst queued behind busy writes that outlast their launches
    k = min(64, max(3, -(-3 * info.l2_bytes // input_bytes(data))))
    rotated = [problem.generate(case.args, case.seed + 1 + i, info.torch_device) for i in range(k)]
    for d in rotated[:2]:
        fn(d)
    burst = [rotated[i % k] for i in range(max(k, 24))]  # K sets in turn: every call cold
    busy = 2 + int(3.0 * len(burst) * host_us * 1e-6 / timer.flush_s)
    reps = max(1, -(-calls // len(burst)))
    rotated_us, rotated_ahead = per_call_burst(fn, burst, timer.buffer, busy, reps)
    warm_us, warm_ahead = per_call_burst(fn, [data] * len(burst), timer.buffer, busy, reps)
    if not (rotated_ahead and warm_ahead):
        print(f"{label}: a burst was not fully queued before its busy work ended: rotated / no-flush not launch-hidden")
    b2b_us = back_to_back(fn, rotated, timer.buffer, busy, reps=10)
    del rotated

    # 4. CUDA graph replays behind the harness's flush
    graph_us = float("nan")
    try:
        replay = capture_graph(fn, data)
        graph_us = statistics.median(timer(replay, data, timed=True)[1]["device_s"] * 1e6 for _ in range(calls))
    except Exception as exc:  # not capturable: report and go on
        print(f"{label}: graph capture failed: {type(exc).__name__}: {exc}")
    row = (label, k, harness_us, write_only_us, rotated_us, warm_us, b2b_us, graph_us,
           profiled_kernels_us(fn, data, timer), host_us, idle_host_us(fn, data))
    torch.cuda.synchronize()
    return row


def profiled_kernels_us(fn, data, timer) -> float:
    """5. kernel durations per call from the profiler, with the harness's flush before each call."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(20):
            timer(fn, data, timed=True)
        torch.cuda.synchronize()
    return sum(e.device_time_total for e in prof.key_averages()
               if not any(w in e.key.lower() for w in ("zero", "fill", "reduce_kernel"))
               and e.device_time_total > 0) / 20


def idle_host_us(fn, data) -> float:
    """Host time of a call with the GPU idle (median of 50)."""
    torch.cuda.synchronize()
    idle_host = []
    for _ in range(50):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn(data)
        idle_host.append((time.perf_counter() - start) * 1e6)
    return statistics.median(idle_host)


if __name__ == "__main__":
    sys.exit(main())
