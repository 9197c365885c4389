"""Timing one call, and turning many timings into statistics.

`time_call` runs in the worker (it has to: the call happens there) and returns raw numbers;
`summarize` and `should_stop` run in the trusted parent, which owns the final statistics.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from typing import Any, Callable

import torch


class L2Flusher:
    """Evicts the GPU's last-level cache by writing a preallocated buffer of twice its size."""

    def __init__(self, l2_bytes: int, device: torch.device):
        self.buffer = torch.empty(max(2 * l2_bytes, 1 << 20), dtype=torch.uint8, device=device)

    def __call__(self) -> None:
        self.buffer.zero_()


def time_call(fn: Callable[[Any], Any], data: Any, flush: L2Flusher | None) -> tuple[Any, float, float]:
    """Call fn(data) once; return (output, device seconds, host seconds).

    On a GPU the device time is the interval between events recorded on the current stream
    around the call, with L2 flushed just before; on CPU both numbers are wall time.
    """
    if flush is None:
        start = time.perf_counter()
        out = fn(data)
        host = time.perf_counter() - start
        return out, host, host
    flush()
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    start = time.perf_counter()
    out = fn(data)
    host = time.perf_counter() - start
    end.record()
    end.synchronize()
    return out, begin.elapsed_time(end) / 1e3, host


@dataclasses.dataclass(frozen=True)
class Stats:
    runs: int
    median: float  # seconds
    mean: float
    std: float
    min: float
    max: float
    ci_rel: float  # half-width of the 95% CI of the median, relative to the median

    @property
    def us(self) -> dict[str, float]:
        return {k: getattr(self, k) * 1e6 for k in ("median", "mean", "std", "min", "max")}


def median_ci(samples: list[float], confidence_z: float = 1.96) -> tuple[float, float]:
    """Distribution-free CI of the median from order statistics (normal approximation to the
    binomial): the ranks n/2 ± z·√n/2."""
    xs = sorted(samples)
    n = len(xs)
    half = confidence_z * math.sqrt(n) / 2
    lo = max(0, math.floor(n / 2 - half))
    hi = min(n - 1, math.ceil(n / 2 + half))
    return xs[lo], xs[hi]


def summarize(samples: list[float]) -> Stats:
    med = statistics.median(samples)
    lo, hi = median_ci(samples)
    return Stats(
        runs=len(samples), median=med, mean=statistics.fmean(samples),
        std=statistics.stdev(samples) if len(samples) > 1 else 0.0,
        min=min(samples), max=max(samples),
        ci_rel=(hi - lo) / 2 / med if med > 0 else math.inf,
    )


def should_stop(samples: list[float], elapsed: float, min_runs: int, max_runs: int,
                max_seconds: float, target_rel_ci: float) -> bool:
    n = len(samples)
    if n >= max_runs or (n >= min_runs and elapsed >= max_seconds):
        return True
    return n >= min_runs and summarize(samples).ci_rel <= target_rel_ci
