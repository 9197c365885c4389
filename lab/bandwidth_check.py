"""Copy-bandwidth measurement: the old single round from an idle GPU against harness.device's (warm-up, best of rounds)."""
import sys, time; sys.path.insert(0, ".")
import torch
from harness.api import measure_copy_bandwidth
def old(size_bytes=1 << 30, repeats=20):
    src = torch.empty(size_bytes, dtype=torch.uint8, device="cuda").fill_(1); dst = torch.empty_like(src)
    for _ in range(3): dst.copy_(src)
    b, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    b.record()
    for _ in range(repeats): dst.copy_(src)
    e.record(); e.synchronize()
    return 2 * size_bytes * repeats / (b.elapsed_time(e) / 1e3)


def main() -> None:
    t = time.perf_counter(); o1 = old(); print(f"old method, idle GPU first: {o1/1e12:.2f} TB/s")
    t = time.perf_counter(); n = measure_copy_bandwidth(); print(f"new method: {n/1e12:.2f} TB/s ({time.perf_counter()-t:.2f} s)")
    print(f"old method again, GPU warm: {old()/1e12:.2f} TB/s")
    for i in range(3): print(f"new method again: {measure_copy_bandwidth()/1e12:.2f} TB/s")


if __name__ == "__main__":
    main()
