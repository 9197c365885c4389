"""The parent's side of timing: what a worker reported, and the statistics over many calls.

The timer itself runs in the worker (harness/worker/timer.py: the call happens there); the parent
owns the statistics and the stopping rule.
"""

from __future__ import annotations

import dataclasses
import math
import statistics


@dataclasses.dataclass(frozen=True)
class CallTiming:
    """What the worker reported for one call (untrusted: harness/integrity.py checks it)."""

    device_s: float     # events on the caller's stream around the call (CPU: wall time)
    host_s: float       # CPU wall time from call to return
    tail_s: float       # how long a device-wide synchronize took after the end event: work left on other streams
    replaced: tuple[str, ...]  # timer functions found replaced after the call


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
