"""A bundled file made slower by a set fraction of its own GPU time, for issue 41's acceptance: a
copy with 3% more GPU work must rank strictly behind the original in every run, and one with 10% more
must read "slower" on every case of --compare and --replay.

`slower(path, fraction)` loads the submission at `path` and returns a custom_kernel that calls it and,
on a GPU, runs a spin kernel right after it on the call's own stream (one program of one warp: a
chain of dependent multiply-adds, a few SM cycles each, nothing read or written but one float). The
extra time is the spin plus one kernel's dispatch, with no second stream: a spin on a stream of its
own, joined at the end, would add the fork and join, which cost far more under the harness's fence
than in the worker's own events that calibrate the spin (BENCHMARKS.md) and are not GPU work. At the
smallest cases one more kernel's dispatch (~1 us) is more than 3% of the call, so
there the copy is slower by that instead. The spin's length is calibrated per input shape at the
shape's first call (untimed: tests and warm-up come first): the original alone and the whole call
are timed with CUDA events, L2 flushed before each repetition as the harness does and the GPU kept
busy while the host enqueues, and the spin's iteration count is searched until the whole call takes
(1 + fraction) x the original's time. What it found goes to stderr (the worker's log). On the CPU
it is the original, unchanged.
"""
import importlib.util
import statistics
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

REPS = 15          # timed repetitions per measurement (their median)
STEPS = 6          # refinements of the iteration count
BUSY_ITERS = 100_000  # the spin that keeps the GPU busy while a measurement is enqueued (~0.2 ms)


@triton.jit
def _spin(cell, n):
    x = tl.load(cell)
    for _ in range(n):
        x = x * 0.9999999 + 0.0000001
    tl.store(cell, x)


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    spec.loader.exec_module(module)
    return module


class _Slower:
    def __init__(self, original, fraction: float, label: str):
        self.original, self.fraction, self.label = original, fraction, label
        self.iterations: dict = {}  # shape key -> spin iterations (None: no spin)
        self.cell = self.flush = None

    def _setup(self, device) -> None:
        if self.cell is None:
            self.cell = torch.zeros(1, dtype=torch.float32, device=device)
            l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 64 << 20
            self.flush = torch.empty(2 * l2, dtype=torch.uint8, device=device)

    def _run(self, data, n):
        out = self.original(data)
        if n is not None:
            _spin[(1,)](self.cell, n, num_warps=1)  # on the call's stream, after the original's kernels
        return out

    def _time(self, data, n) -> float:
        times = []
        for _ in range(REPS):
            self.flush.zero_()
            _spin[(1,)](self.cell, BUSY_ITERS, num_warps=1)  # busy while the host enqueues what is timed
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            self._run(data, n)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e3)  # µs
        return statistics.median(times)

    def _spin_us(self, n: int) -> float:
        """The spin kernel alone, n iterations, µs (the median of REPS)."""
        times = []
        for _ in range(REPS):
            _spin[(1,)](self.cell, BUSY_ITERS, num_warps=1)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            _spin[(1,)](self.cell, n, num_warps=1)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e3)
        return statistics.median(times)

    def _calibrate(self, data):
        self._run(data, 0)  # compiles both
        base = self._time(data, None)
        target = (1 + self.fraction) * base
        probe = 200_000
        per_iter = max(1e-5, (self._spin_us(probe) - self._spin_us(0)) / probe)  # µs per iteration
        n, best = max(0, int(target / per_iter)), None
        for _ in range(STEPS):
            total = self._time(data, n)
            if best is None or abs(total - target) < abs(best[1] - target):
                best = (n, total)
            if abs(total - target) <= 0.1 * self.fraction * base:
                break
            n = max(0, int(n + (target - total) / per_iter))
        print(f"{self.label}: q {tuple(data[0].shape)}, {data[3].numel() - 1} sequences: original {base:.1f} us, "
              f"with the spin {best[1]:.1f} us (x{best[1] / base:.3f}, target x{1 + self.fraction:.3f}, "
              f"{best[0]} iterations)", file=sys.stderr, flush=True)
        return best[0]

    def __call__(self, data):
        q = data[0]
        if q.device.type != "cuda":
            return self.original(data)
        self._setup(q.device)
        key = tuple(tuple(t.shape) for t in _tensors(data))
        if key not in self.iterations:
            self.iterations[key] = self._calibrate(data)
        return self._run(data, self.iterations[key])


def _tensors(tree):
    if isinstance(tree, torch.Tensor):
        return [tree]
    items = tree.values() if isinstance(tree, dict) else tree if isinstance(tree, (tuple, list)) else ()
    return [t for item in items for t in _tensors(item)]


def slower(path: Path, fraction: float, label: str = "slower"):
    """custom_kernel of the submission at `path`, slowed by `fraction` of its own GPU time."""
    return _Slower(_load(path, f"original_{path.stem}").custom_kernel, fraction, label)
