"""The parent's side of timing: what a worker reported, the rules that decide whether a reported
time can stand, and the statistics over many calls.

The timer itself runs in the worker (harness/worker/timer.py: the call happens there); the parent
owns the integrity rules, the statistics and the stopping rule. (The vendor profiler's check is
harness/parent/audit.py.)
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from typing import Optional, Sequence


@dataclasses.dataclass(frozen=True)
class CallTiming:
    """What the worker reported for one call (untrusted: `timing_problem` below checks it)."""

    device_s: float     # events on the caller's stream around the call (CPU: wall time)
    host_s: float       # CPU wall time from call to return
    tail_s: float       # how long a device-wide synchronize took after the end event: work left on other streams
    replaced: tuple[str, ...]  # timer functions found replaced after the call
    caught_up: bool = False  # the GPU had passed the start event when the call returned: it may
                             # have waited for the call's launches inside the timed interval
    least_s: Optional[float] = None  # fenced: the parent's reading less its fastest null call, the
                                     # least the call took (device_s subtracts the median one)
    calls: int = 1  # a burst (--energy): how many calls the worker says it ran back to back


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


# Work left on other streams after the end event shows as the time a device-wide synchronize
# takes right after it (the "tail"). Honest calls on the H200 (BENCHMARKS.md): median tails of
# 18-27 µs on small cases and up to 86 µs on the 8k cases, one call 110 µs. Hiding work only pays
# when the hidden part exceeds what the events show, so the tail is compared with the device time:
TAIL_MEDIAN_S = 50e-6    # a case: rejected if the median tail exceeds max(50 µs, the median device time)
# ... or if more than TAIL_GROSS_SHARE of its calls (and at least TAIL_GROSS_CALLS) have a tail over
# max(1 ms, their device time). Not one call alone: a host stall can delay one synchronize by a
# millisecond (an honest triton_bf16 call was rejected so on the H200, BENCHMARKS.md).
TAIL_GROSS_S = 1e-3
TAIL_GROSS_SHARE = 0.05
TAIL_GROSS_CALLS = 3
# The floor check allows reads up to 25% faster than the measured copy bandwidth.
FLOOR_FACTOR = 0.8


def timing_problem(timing: CallTiming, floor_s: Optional[float]) -> Optional[str]:
    """Why a call's timing cannot be trusted, or None. A fenced call is held to the least it took
    (`least_s`), so the spread of the fence's own hand-over never rejects an honest call."""
    seconds, who = (timing.device_s, "reported by the worker") if timing.least_s is None else (timing.least_s, "measured")
    if not seconds > 0 or not timing.host_s >= 0 or not timing.tail_s >= 0:
        return f"impossible time {who}: {seconds!r} s"
    if timing.replaced:
        return f"timer function {timing.replaced[0]} was replaced by the submission"
    if floor_s is not None and seconds < floor_s:
        return (f"impossible time: {seconds * 1e6:.2f} µs is below the physical floor of "
                f"{floor_s * 1e6:.2f} µs for the bytes this case must read")
    return None


def tail_problem(tails: list[float], device_times: list[float]) -> Optional[str]:
    """A case whose calls typically leave more work behind than the events measured, or whose
    calls often leave far more behind."""
    tail, device = statistics.median(tails), statistics.median(device_times)
    limit = max(TAIL_MEDIAN_S, device)
    if tail > limit:
        return (f"work continued on another stream after the timed calls: median {tail * 1e6:.0f} µs "
                f"after the end event, more than the {limit * 1e6:.0f} µs the events measured")
    gross = [t for t, d in zip(tails, device_times) if t > max(TAIL_GROSS_S, d)]
    if len(gross) >= max(TAIL_GROSS_CALLS, TAIL_GROSS_SHARE * len(tails)):
        return (f"work continued on another stream after {len(gross)} of {len(tails)} timed calls: "
                f"up to {max(gross) * 1e3:.2f} ms after the end event")
    return None


# A case is "noisy" when the bulk of its calls is spread out, not when a few calls are slow: a std
# counts one call at 100x the median as much as a broad distribution, and marked most small cases
# on the H200 while their medians' CIs stayed within +-2.3% (BENCHMARKS.md).
NOISY_SPREAD = 0.10  # the middle half of the calls spans more than 10% of the median ...
SLOW_FACTOR = 2.0    # ... or more than SLOW_SHARE of the calls took over SLOW_FACTOR x the median
SLOW_SHARE = 0.05    # ... and at least SLOW_CALLS of them
SLOW_CALLS = 3
CAUGHT_UP_SHIFT = 0.02  # warn when the calls that caught up raise the median by more than 2%


def caught_up_warnings(flags: list[bool], device_times: list[float]) -> tuple[str, ...]:
    """A warning when the timed calls that let the GPU reach the start event before their launches
    were all queued (they may include the GPU waiting for the host) move the case's median: when
    they are half the calls or more, or when the median of the other calls is more than
    CAUGHT_UP_SHIFT lower. The worker's busy work grows after each such call, so a few of them in
    a case are expected and harmless (BENCHMARKS.md)."""
    caught = sum(flags)
    if not caught:
        return ()
    clean = [t for t, flag in zip(device_times, flags) if not flag]
    head = f"launch-bound: the GPU caught up with the host before {caught} of {len(flags)} timed calls returned"
    if 2 * len(clean) <= len(flags):
        return (f"{head}; the median may include waiting for launches",)
    everything, others = statistics.median(device_times), statistics.median(clean)
    if everything <= (1 + CAUGHT_UP_SHIFT) * others:
        return ()
    return (f"{head}; the median of the other calls is {others * 1e6:.1f} µs "
            f"({1 - others / everything:.0%} lower)",)


def noise_warnings(samples: list[float], stats: Stats, elapsed: float, budget: float, target_rel_ci: float,
                   caught_up: Sequence[bool] = ()) -> tuple[str, ...]:
    """Why a case's median may not be trustworthy or tell the whole story: the middle half of its
    calls spread wide, many calls far slower than the median (saying how many of them the GPU
    spent partly waiting for launches, from the calls' `caught_up` flags), or the budget ran out
    first. A few slow calls alone are not a warning (they stay in the std, the max and the
    exported samples)."""
    assert not caught_up or len(caught_up) == len(samples), "one caught_up flag per sample"
    out = []
    if stats.median > 0 and len(samples) > 1:
        q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
        if (q3 - q1) / stats.median > NOISY_SPREAD:
            out.append(f"noisy: the middle half of the calls spans {(q3 - q1) / stats.median:.0%} of the median")
        slow = [i for i, t in enumerate(samples) if t > SLOW_FACTOR * stats.median]
        if len(slow) >= SLOW_CALLS and len(slow) > SLOW_SHARE * len(samples):
            waited = sum(1 for i in slow if caught_up[i]) if caught_up else 0
            out.append(f"slow calls: {len(slow)} of {len(samples)} took over {SLOW_FACTOR:g}x the median "
                       f"(up to {max(samples[i] for i in slow) * 1e6:.1f} µs"
                       + (f"; {waited} of them launch-bound)" if caught_up else ")"))
    if stats.ci_rel > target_rel_ci and elapsed >= budget:
        out.append(f"time budget hit: 95% CI of the median ±{stats.ci_rel:.2%} (target ±{target_rel_ci:.0%})")
    return tuple(out)
