"""Energy per call from the GPU's energy counter (--energy): the counter's change over the timed
calls less its change over the harness's own per-call work, paced alike, per call."""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, Optional

MIN_PERIODS = 10  # the timed block must span at least this many counter steps

ENERGY_METHOD = ("J per call = (counter over the timed calls - counter over the harness's own per-call work "
                 "without the calls, paced alike) / calls; ± one counter step per block end")


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


def energy_per_call(calls: EnergyBlock, harness: EnergyBlock, n: int,
                    period: float) -> tuple[Optional[float], Optional[float], str]:
    """(joules per call, its ± bound, note) from block A (`calls`: the timed calls with the harness's
    work around them) and block B (`harness`: the same work without the calls), n calls. Each block's
    change may be off by what the GPU drew in one counter step (`period`), hence the bound; a block
    A shorter than MIN_PERIODS steps, or a difference inside the bound, gives no figure, only a note."""
    if n < 1 or calls.seconds <= 0:
        return None, None, "no timed calls"
    if calls.seconds < MIN_PERIODS * period:
        return None, None, (f"too short to measure: the timed calls took {calls.seconds * 1e3:.0f} ms, the energy "
                            f"counter moves every {period * 1e3:.0f} ms (at least {MIN_PERIODS} steps needed)")
    watts = max(calls.mj / calls.seconds, harness.mj / harness.seconds if harness.seconds > 0 else 0.0) / 1e3
    per_call = (calls.mj - harness.mj) / 1e3 / n
    bound = 2 * watts * period / n
    if per_call <= bound:
        return None, None, (f"below the counter's resolution: {per_call * 1e3:.3f} ± {bound * 1e3:.3f} mJ per call")
    return per_call, bound, ""


def paced(step: Callable[[], None], n: int, seconds: float, clock: Callable[[], float] = time.perf_counter,
          sleep: Callable[[float], None] = time.sleep) -> None:
    """`step()` n times spread evenly over `seconds` (each at the start of its slot; the GPU idles
    between them as it did between the timed calls), then idle to the end of `seconds`."""
    start = clock()
    for i in range(n):
        _wait_until(start + i * seconds / n, clock, sleep)
        step()
    _wait_until(start + seconds, clock, sleep)


def _wait_until(deadline: float, clock: Callable[[], float], sleep: Callable[[float], None]) -> None:
    while (left := deadline - clock()) > 0:
        sleep(left - 0.001 if left > 0.002 else 0)  # sleep most of the way, spin the last millisecond
