"""Energy per call from the GPU's energy counter (--energy): the counter's change over a burst of the
case's calls run back to back, per call (harness/parent/gpuwatch.py says how and why)."""

from __future__ import annotations

import dataclasses
import statistics
from typing import Callable, Optional

BURST_PERIODS = 30   # a burst spans this many of the counter's steps (so its ± is at most 2/30 of it)...
BURST_MAX_S = 3.0    # ...but lasts no longer than this
BURST_MIN_PERIODS = 10  # a burst shorter than this many steps (too little time left) gives no figure
BURST_FLOOR = 0.25   # a burst whose calls each took under this share of the ranked median gives no figure
IDLE_MARGIN = 1.1    # nor one that drew no more than this times the idle GPU's power
PROBE_CHANGES = 5    # the counter's period: the median of the intervals between this many of its changes

ENERGY_METHOD = ("J per call = the GPU's energy counter over a burst of the case's calls back to back (the "
                 "worker's calls on the case's last inputs, no flush, busy work, refill or reference between "
                 "them; the last output checked) / the worker's count of calls; ± one counter step at each end "
                 "of the burst; a diagnostic: the count and the work are the worker's")


@dataclasses.dataclass(frozen=True)
class EnergyReading:
    mj: float     # the counter, millijoules
    t: float      # time.perf_counter() when read


@dataclasses.dataclass(frozen=True)
class EnergyBlock:
    """The counter's change over a block of work."""

    mj: float
    seconds: float

    @staticmethod
    def between(start: EnergyReading, end: EnergyReading) -> "EnergyBlock":
        return EnergyBlock(end.mj - start.mj, end.t - start.t)


def burst_seconds(period: float) -> float:
    """How long a case's burst runs for a counter that moves every `period` seconds."""
    return min(BURST_PERIODS * period, BURST_MAX_S)


def probe_counter(read: Callable[[], Optional[float]], probe_s: float, sleep: Callable[[float], None],
                  clock: Callable[[], float]) -> tuple[float, Optional[float]]:
    """(how often the counter `read` moves, in seconds; the watts it counted meanwhile, or None):
    the median interval between PROBE_CHANGES of its changes, watched for at most `probe_s` (that
    long, and no watts, when it moved less than twice). Run before any worker starts, the watts are
    the idle GPU's."""
    last, changes = read(), []
    start = clock()
    while len(changes) < PROBE_CHANGES and clock() - start < probe_s:
        sleep(0.0005)
        now = read()
        if now is not None and last is not None and now != last:
            changes.append((clock(), now))
        last = now
    if len(changes) < 2:
        return probe_s, None
    period = statistics.median(b[0] - a[0] for a, b in zip(changes, changes[1:]))
    (t0, e0), (t1, e1) = changes[0], changes[-1]
    return period, (e1 - e0) / 1e3 / (t1 - t0)


def energy_per_call(burst: EnergyBlock, calls: int, period: float, ranked_s: Optional[float],
                    idle_w: Optional[float] = None) -> tuple[Optional[float], Optional[float], str]:
    """(joules per call, its ± bound, note) from the counter's change over a burst of `calls` calls.
    The reading at each end of the burst may lag by one counter step (`period`) at the burst's mean
    power, hence the bound. No figure, only a note, for a burst shorter than BURST_MIN_PERIODS steps,
    one whose calls (by the worker's count) took under BURST_FLOOR of the ranked median `ranked_s`
    each (None: no ranked device time to hold them to, the CPU's), or one that drew no more than
    IDLE_MARGIN times the idle GPU (`idle_w`): a count, or work, the ranked calls do not stand behind."""
    if calls < 1 or burst.seconds <= 0:
        return None, None, "no calls in the burst"
    if burst.seconds < BURST_MIN_PERIODS * period:
        return None, None, (f"too short to measure: the burst took {burst.seconds * 1e3:.0f} ms, the energy counter "
                            f"moves every {period * 1e3:.0f} ms (at least {BURST_MIN_PERIODS} steps needed)")
    each = burst.seconds / calls
    if ranked_s is not None and not each >= BURST_FLOOR * ranked_s > 0:
        return None, None, (f"not measured: the burst's {calls} calls took {each * 1e6:,.1f} µs each, under "
                            f"{BURST_FLOOR:.0%} of the ranked median {ranked_s * 1e6:,.1f} µs")
    watts = burst.mj / 1e3 / burst.seconds
    if watts <= 0 or idle_w is not None and watts <= IDLE_MARGIN * idle_w:
        return None, None, (f"not measured: the burst drew {watts:,.0f} W" + (
            f", the idle GPU {idle_w:,.0f} W" if idle_w is not None else ""))
    per_call = burst.mj / 1e3 / calls
    return per_call, 2 * per_call * period / burst.seconds, ""  # (relative: 2 steps of the burst's time)
