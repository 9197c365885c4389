"""Energy per call from the GPU's energy counter (--energy): the counter's change over a burst of the
case's calls run back to back, per call (harness/parent/gpuwatch.py says how and why)."""

from __future__ import annotations

import dataclasses
from typing import Optional

BURST_PERIODS = 30   # a burst spans this many of the counter's steps (so its ± is at most 2/30 of it)...
BURST_MAX_S = 3.0    # ...but lasts no longer than this
BURST_MIN_PERIODS = 10  # a burst shorter than this many steps (too little time left) gives no figure
BURST_FLOOR = 0.25   # a burst whose calls each took under this share of the ranked median gives no figure

ENERGY_METHOD = ("J per call = the GPU's energy counter over a burst of the case's calls back to back (the "
                 "worker's calls on the case's last inputs, no flush, busy work, refill or reference between "
                 "them; the last output checked) / the calls; ± one counter step at each end of the burst")


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


def energy_per_call(burst: EnergyBlock, calls: int, period: float,
                    ranked_s: float) -> tuple[Optional[float], Optional[float], str]:
    """(joules per call, its ± bound, note) from the counter's change over a burst of `calls` calls.
    The reading at each end of the burst may lag by one counter step (`period`) at the burst's mean
    power, hence the bound. No figure, only a note, for a burst shorter than BURST_MIN_PERIODS steps,
    one whose calls (by the worker's count) took under BURST_FLOOR of the ranked median `ranked_s`
    each (a count or work the ranked calls do not stand behind), or a counter that did not move."""
    if calls < 1 or burst.seconds <= 0:
        return None, None, "no calls in the burst"
    if burst.seconds < BURST_MIN_PERIODS * period:
        return None, None, (f"too short to measure: the burst took {burst.seconds * 1e3:.0f} ms, the energy counter "
                            f"moves every {period * 1e3:.0f} ms (at least {BURST_MIN_PERIODS} steps needed)")
    each = burst.seconds / calls
    if ranked_s > 0 and each < BURST_FLOOR * ranked_s:
        return None, None, (f"not measured: the burst's {calls} calls took {each * 1e6:,.1f} µs each, under "
                            f"{BURST_FLOOR:.0%} of the ranked median {ranked_s * 1e6:,.1f} µs")
    if burst.mj <= 0:
        return None, None, f"not measured: the energy counter moved by {burst.mj:,.0f} mJ over the burst"
    per_call = burst.mj / 1e3 / calls
    return per_call, 2 * per_call * period / burst.seconds, ""  # (relative: 2 steps of the burst's time)
