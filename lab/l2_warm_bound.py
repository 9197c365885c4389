"""How much can work before the fence's clock gain by warming L2? The fence (harness/parent/fence.py) flushes
L2 before E_mid, and its census proves no kernel holds an SM when the call starts, but a kernel that
ran after the flush and exited (or a copy engine) could have pulled the KV cache into L2. The most
that gains is the call's time with its whole KV cache already in L2 against its time with L2 flushed.

For each bundled file and benchmark case: the median of `--calls` calls timed with CUDA events,
(a) after the fence's flush (write + read 2x L2), (b) after the same flush followed by a read of
the KV cache in the file's format (named in the file's name; so as much of it as fits is in L2). Prints a Markdown table last.
Usage (NVIDIA GPU, repo root): python3 lab/l2_warm_bound.py [--calls 40] [FILE ...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.api import detect  # noqa: E402
from harness.api import load_problem  # noqa: E402
from lab.knob_sweep import load  # noqa: E402

DEFAULT = ["submissions/triton_bf16.py", "submissions/triton_fp8.py", "submissions/triton_mxfp4.py"]


def kv_tensors(data, fmt: str) -> list[torch.Tensor]:
    """The tensors of the KV cache in format `fmt` (the file's: its name says which)."""
    found = []

    def walk(x):
        if isinstance(x, torch.Tensor):
            found.append(x)
        elif isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v)

    walk(data[1][fmt])
    return found


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("files", nargs="*", default=DEFAULT)
    parser.add_argument("--calls", type=int, default=40)
    args = parser.parse_args()
    info = detect("cuda")
    problem = load_problem(ROOT / "task.yml")
    flush = torch.zeros(2 * info.l2_bytes // 4, dtype=torch.float32, device="cuda")
    sink = torch.zeros((), device="cuda")
    rows = []
    for n, path in enumerate(args.files):
        fn = load(str(ROOT / path), n, {}).custom_kernel
        fmt = next((f for f in ("mxfp4", "fp8", "bf16") if f in Path(path).stem), "bf16")
        for case in problem.spec.cases("benchmark"):
            data = problem.generate(case.args, case.seed, info.torch_device)
            kv = [t.view(torch.uint8).view(-1) if t.is_contiguous() else t.contiguous().view(torch.uint8).view(-1)
                  for t in kv_tensors(data, fmt)]
            kv_bytes = sum(t.numel() for t in kv)
            for _ in range(3):
                fn(data)
            times: dict[str, list[float]] = {"flushed": [], "warm": []}
            for i in range(2 * args.calls):
                way = "flushed" if i % 2 == 0 else "warm"
                flush.zero_()
                torch.sum(flush, 0, out=sink)
                if way == "warm":
                    for t in kv:
                        torch.sum(t.view(torch.int8), 0, dtype=torch.int32)
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda._sleep(200_000)  # ~0.1 ms of GPU time: the call's launches are queued before `start`
                start.record()
                fn(data)
                end.record()
                end.synchronize()
                times[way].append(start.elapsed_time(end) * 1e3)
            cold, warm = statistics.median(times["flushed"]), statistics.median(times["warm"])
            rows.append((Path(path).name, problem.label(case.args), kv_bytes / 2**20, cold, warm))
            del data, kv
            torch.cuda.synchronize()
    print(f"\n{info.describe()}, L2 {info.l2_bytes / 2**20:.0f} MiB, {args.calls} calls per way")
    print("| file | case | KV MiB (its format) | flushed µs | KV read into L2 µs | gain µs | gain % |")
    print("|---|---|---|---|---|---|---|")
    for name, label, mib, cold, warm in rows:
        print(f"| {name} | {label} | {mib:.1f} | {cold:.2f} | {warm:.2f} | {cold - warm:.2f} | {100 * (cold - warm) / cold:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
