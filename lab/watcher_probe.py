"""Can a kernel of the parent's watch DONE without hanging, and how much sooner than the stream's own
wait does it see it? (issue 37: an early DONE hides the worker's last step in the parent's wake-up
after DONE, docs/threat-model.md "Still open" (3); a watcher kernel that spun on DONE without a bound
hung the fenced run on the H100, BENCHMARKS.md.)

Two processes share a fence buffer (harness/api.py `Buffer`, its descriptor passed to the child), as
the parent and the worker do. Per call the child (the worker's stand-in) enqueues on a stream of its
own: wait GATE >= seq, a kernel that sleeps ~--work-us, DONE := seq, and says so; the parent then
enqueues on its stream, behind a flag of its own released once all is enqueued (the fence's GO):
E_mid, GATE := seq, the wait for DONE, E_end, the wait being either the
stream's own (`cuStreamWaitValue32`, what the fence does) or the fence's DONE watcher kernel
(harness/parent/watcher.py, run here on the parent's stream after GATE: one warp polling DONE from the
SMs with a bound, --limit-us; past it, it stops and records that it timed out), followed by the
stream's own wait (so that a timed-out watcher still waits for DONE). Calls alternate the two.
A watcher that never sees DONE within its bound means the worker's kernels did not run beside it
(the hang's cause); one that sees it shortens the wake-up by the difference of the two medians.
CUDA_DEVICE_MAX_CONNECTIONS (the hardware queues a context's streams share) is read from the
environment by both processes, as is MPS (run it as an MPS client, as the fence's processes are).

Usage (GPU machine, repo root):
    python3 lab/watcher_probe.py [--calls 100] [--work-us 10] [--limit-us 500]
Prints both waits' median interval, the watcher's timeouts, and how long it spun when it saw DONE.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

def child(fd: int, work_us: float) -> int:
    """The worker's stand-in: per seq read on stdin, GATE -> a sleeping kernel -> DONE, then "ok"."""
    import torch

    sys.path.insert(0, str(ROOT))
    from harness.api import Buffer, fence

    flags = fence.StreamFlags(Buffer(4096, "cuda", fd))
    stream = torch.cuda.Stream()
    cycles = int(work_us * 1.8e3)  # ~1.8 GHz
    with torch.cuda.stream(stream):
        torch.cuda._sleep(cycles)  # (loaded before any wait: a first launch behind GATE would wait for an idle GPU)
    torch.cuda.synchronize()
    for line in sys.stdin:
        seq = int(line)
        with torch.cuda.stream(stream):
            flags.wait(stream, fence.GATE, seq)
            torch.cuda._sleep(cycles)
            flags.write(stream, fence.DONE, seq)
        print("ok", flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--work-us", type=float, default=10.0)
    parser.add_argument("--limit-us", type=float, default=500.0)
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        return child(args.child, args.work_us)
    import torch

    sys.path.insert(0, str(ROOT))
    from harness.api import Buffer, fence, watcher

    buffer = Buffer(4096, "cuda")
    buffer.bytes_tensor().zero_()
    flags = fence.StreamFlags(buffer)
    watch = watcher.DoneWatcher()
    slot, started = (torch.zeros(16, dtype=torch.int32, device="cuda") for _ in range(2))
    go_buffer = Buffer(4096, "cuda")  # the parent's own: its stream runs a call's sequence once all is enqueued
    go_buffer.bytes_tensor().zero_()
    go = fence.StreamFlags(go_buffer)
    stream, side = torch.cuda.Stream(), torch.cuda.Stream()

    def launch(seq: int) -> None:
        watch.launch(stream, flags.base + fence.DONE, seq, slot, args.limit_us * 1e-6, started.data_ptr())

    # Launched once before any wait (DONE is 0, so it sees it at once): under lazy module loading a
    # first launch behind GO waits for an idle GPU, which never comes (the unbounded watcher's hang on
    # the H100 may have been that and not the watcher itself).
    launch(0)
    torch.cuda.synchronize()
    proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--child", str(buffer.fd),
                             "--work-us", str(args.work_us)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, pass_fds=(buffer.fd,))
    times: dict[str, list[float]] = {"stream": [], "watcher": []}
    timeouts, spun = 0, []
    try:
        for seq in range(1, 2 * args.calls + 1):
            how = "watcher" if seq % 2 else "stream"
            proc.stdin.write(f"{seq}\n")
            proc.stdin.flush()
            if proc.stdout.readline().strip() != "ok":
                print(f"the child stopped at call {seq} (exit {proc.poll()})")
                return 1
            mid, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            with torch.cuda.stream(stream):
                go.wait(stream, 0, seq)
                mid.record()
                flags.write(stream, fence.GATE, seq)
                if how == "watcher":
                    launch(seq)
                flags.wait(stream, fence.DONE, seq)  # (after a watcher too: one that timed out still waits)
                end.record()
            go.write(side, 0, seq)  # (no launch time of the host's in the interval, as in the fence)
            end.synchronize()
            times[how].append(mid.elapsed_time(end) * 1e3)
            if how == "watcher":
                seen, ns = int(watch.out[0].item()), int(watch.out[2:4].view(torch.int64).item())
                timeouts += seen != 1
                if seen == 1:
                    spun.append(ns / 1e3)
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    stream_us, watcher_us = (statistics.median(times[k][5:]) for k in ("stream", "watcher"))
    print(f"stream's own wait: median {stream_us:.2f} µs; watcher: median {watcher_us:.2f} µs "
          f"({stream_us - watcher_us:+.2f} µs sooner), timed out in {timeouts} of {len(times['watcher'])} calls"
          + (f", spun {statistics.median(spun):.1f} µs (median) when it saw DONE" if spun else "")
          + f" (work {args.work_us:g} µs, bound {args.limit_us:g} µs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
