"""The GPU's own gauges, read by the trusted parent around every benchmark case: SM and memory
clocks, temperature, power, throttle reasons and the energy counter (NVML through the maintained
`nvidia-ml-py` package on NVIDIA, `amdsmi` on AMD; both optional: without them the watch says
"not available" and nothing else changes).

Clocks. A case is watched from just before its first timed call to just after its last: a sample
then, and one at most every SAMPLE_EVERY_S between calls (after a call returned, never inside one).
It is flagged (a warning on the case, stored and exported) when its SM or memory clock fell more
than CLOCK_FALL below the highest seen before the fall (in the case or in the run's earlier cases),
or when the GPU reported a throttle reason other than idle or a clock setting (power cap, thermal or
hardware slowdown, power brake), at a sample or through NVML's violation counters (the time spent
power- or thermal-capped, which also catches a cap between samples). `run_line` sums a run up in one
line: "clocks steady: SM a–b MHz, memory c MHz, max T °C, max P W", or which cases were not.

Energy (--energy). NVML's total-energy counter (mJ) moves in steps (every few to ~100 ms), too
slowly to read around one call, and a fenced call costs milliseconds of the parent's refill, flush
and census, so the timed calls are too sparse to meter. At the run's start, before any worker, the
counter is watched for its period and the idle GPU's power (`counter_period`, `idle_watts`). After a
case's timed calls the parent reads the counter, asks the worker for a burst of calls back to back on
the case's last inputs (harness/worker/timer.py, "burst": BURST_PERIODS counter steps, at most
BURST_MAX_S), reads the counter again as soon as the worker answers, then judges the burst's last
output (engine.py, `_energy`). The change over the worker's count of calls is the energy of a call
run back to back: its kernels and launch gaps at the power the GPU drew, its static power included,
with a warm L2 (no flush runs between the calls). The harness's own work stays out because none runs
inside the burst: no flush, busy work, refill, reference or check between the calls; what the span
holds besides them is the request, the slot's reset and the output's copy into it, and the reply,
well under a millisecond of a burst of seconds. Each end's reading may lag by one counter step: that
bound is shown as ±. The count and the work are the worker's: the parent checks only the last output,
that the count does not put a call under BURST_FLOOR of the ranked median, and that the burst drew
more than IDLE_MARGIN times the idle GPU. A worker that answers the burst's repeated inputs from a
cache while burning power, or miscounts within those bounds, can still show a lower figure, so it is
a diagnostic, like the worker's own timings: it never ranks. A GPU's counter counts all of its work,
so --energy refuses evaluators that share a GPU (harness/cli/run_parallel.py). ENERGY_METHOD says it
in one line for the exports.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, Callable, Optional, Sequence

from harness.parent.energy import ENERGY_METHOD, EnergyBlock, EnergyReading, energy_per_call, probe_counter  # noqa: F401

SAMPLE_EVERY_S = 0.1   # the least time between two samples while a case's timed calls run
CLOCK_FALL = 0.05      # a clock more than 5% below the highest seen before it: flagged
PERIOD_PROBE_S = 1.0   # energy: how long `counter_period` watches the counter at most
INSTALL = "pip install 'mla-eval[gpu]'"

# NVML's clock event (throttle) reasons, nvmlClocksEventReason* (the bits are NVML's API)
REASONS = {0x1: "idle", 0x2: "application clocks setting", 0x4: "power cap", 0x8: "hardware slowdown",
           0x10: "sync boost", 0x20: "thermal slowdown", 0x40: "hardware thermal slowdown",
           0x80: "hardware power brake", 0x100: "display clock setting"}
BENIGN = 0x1 | 0x2 | 0x10 | 0x100  # a GPU waiting for work, or clocks someone set: not throttling


@dataclasses.dataclass(frozen=True)
class Sample:
    """One reading of the gauges; None where the GPU does not report one."""

    t: float                              # time.monotonic()
    sm_mhz: Optional[float] = None
    mem_mhz: Optional[float] = None
    temp_c: Optional[float] = None
    power_w: Optional[float] = None
    reasons: int = 0                      # REASONS bits
    power_capped_ns: Optional[int] = None  # NVML's violation counters: time spent power- / thermal-capped
    thermal_capped_ns: Optional[int] = None


def reason_names(bits: int, benign: bool = False) -> list[str]:
    """The throttle reasons in `bits` (only the ones that slow a GPU unless `benign`), by name."""
    return [name for bit, name in REASONS.items() if bits & bit and (benign or not bit & BENIGN)]


# ---------------------------------------------------------------- backends
def _gauge(fn: Callable[[], Any]) -> Any:
    """One reading, or None where the GPU or its library does not give it (NVMLError(NotSupported),
    AmdSmiLibraryException and friends: that gauge is missing)."""
    try:
        return fn()
    except Exception:  # noqa: BLE001
        return None


class NvmlBackend:
    """NVML through nvidia-ml-py (`import pynvml`), for the GPU this process uses."""

    vendor = "nvidia"

    def __init__(self, nvml: Any, handle: Any):
        self.nvml, self.handle = nvml, handle

    def sample(self) -> Sample:
        n, h = self.nvml, self.handle
        reasons_fn = getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            n, "nvmlDeviceGetCurrentClocksThrottleReasons", None)  # (the older name, before driver 535)
        power = _gauge(lambda: n.nvmlDeviceGetPowerUsage(h))  # mW
        return Sample(time.monotonic(), _gauge(lambda: n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM)),
                      _gauge(lambda: n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM)),
                      _gauge(lambda: n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU)),
                      power / 1e3 if power is not None else None,
                      int(_gauge(lambda: reasons_fn(h)) or 0) if reasons_fn else 0,
                      self._violation(getattr(n, "NVML_PERF_POLICY_POWER", 0)),
                      self._violation(getattr(n, "NVML_PERF_POLICY_THERMAL", 1)))

    def _violation(self, policy: int) -> Optional[int]:
        status = _gauge(lambda: self.nvml.nvmlDeviceGetViolationStatus(self.handle, policy))
        value = getattr(status, "violationTime", None)
        return int(value) if value is not None else None

    def energy_mj(self) -> Optional[float]:
        value = _gauge(lambda: self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle))
        return float(value) if value is not None else None

    def facts(self) -> dict[str, Any]:
        n, h = self.nvml, self.handle

        def text(value: Any) -> Any:
            return value.decode() if isinstance(value, bytes) else value

        cuda = _gauge(n.nvmlSystemGetCudaDriverVersion)
        return {"gpu": text(_gauge(lambda: n.nvmlDeviceGetName(h))),
                "driver": text(_gauge(n.nvmlSystemGetDriverVersion)),
                "cuda_driver": f"{cuda // 1000}.{cuda % 1000 // 10}" if isinstance(cuda, int) else None,
                "max_sm_mhz": _gauge(lambda: n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_SM)),
                "max_mem_mhz": _gauge(lambda: n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_MEM)),
                "application_sm_mhz": _gauge(lambda: n.nvmlDeviceGetApplicationsClock(h, n.NVML_CLOCK_SM)),
                "power_limit_w": (lambda mw: mw / 1e3 if mw else None)(
                    _gauge(lambda: n.nvmlDeviceGetEnforcedPowerLimit(h)))}


class AmdSmiBackend:
    """amdsmi (ROCm's Python bindings), for the GPU this process uses. Its throttle status bits are
    not NVML's: any non-zero status is reported as "throttle status 0x..."."""

    vendor = "amd"

    def __init__(self, amdsmi: Any, handle: Any):
        self.smi, self.handle = amdsmi, handle

    def sample(self) -> Sample:
        s, h = self.smi, self.handle
        clock = lambda kind: (_gauge(lambda: s.amdsmi_get_clock_info(h, kind)) or {}).get("clk")  # noqa: E731
        power = _gauge(lambda: s.amdsmi_get_power_info(h)) or {}
        metrics = _gauge(lambda: s.amdsmi_get_gpu_metrics_info(h)) or {}
        throttle = metrics.get("throttle_status")
        watts = power.get("current_socket_power") or power.get("average_socket_power")
        return Sample(time.monotonic(), _number(clock(s.AmdSmiClkType.GFX)), _number(clock(s.AmdSmiClkType.MEM)),
                      _number(_gauge(lambda: s.amdsmi_get_temp_metric(h, s.AmdSmiTemperatureType.HOTSPOT,
                                                                        s.AmdSmiTemperatureMetric.CURRENT))),
                      _number(watts), 0x4 if isinstance(throttle, int) and throttle else 0)

    def energy_mj(self) -> Optional[float]:
        count = _gauge(lambda: self.smi.amdsmi_get_energy_count(self.handle)) or {}
        ticks, unit = count.get("energy_accumulator"), count.get("counter_resolution")  # unit: µJ per tick
        return ticks * unit / 1e3 if isinstance(ticks, (int, float)) and isinstance(unit, (int, float)) else None

    def facts(self) -> dict[str, Any]:
        s, h = self.smi, self.handle
        info = _gauge(lambda: s.amdsmi_get_gpu_asic_info(h)) or {}
        driver = _gauge(lambda: s.amdsmi_get_gpu_driver_info(h)) or {}
        return {"gpu": info.get("market_name"), "driver": driver.get("driver_version")}


def _number(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _torch_gpu_ids() -> tuple[Optional[str], Optional[str]]:
    """The UUID ("GPU-...") and PCI bus id of the GPU this process's torch calls device 0, where torch
    says (both, with CUDA_VISIBLE_DEVICES, name the same GPU NVML knows by another index)."""
    try:
        import torch

        props = torch.cuda.get_device_properties(0)
    except Exception:  # noqa: BLE001 - no GPU, or torch without CUDA
        return None, None
    uuid = getattr(props, "uuid", None)
    uuid = str(uuid) if uuid is not None else None
    if uuid and not uuid.startswith(("GPU-", "MIG-")):
        uuid = f"GPU-{uuid}"
    bus = getattr(props, "pci_bus_id", None)
    pci = (f"{getattr(props, 'pci_domain_id', 0):08x}:{bus:02x}:{getattr(props, 'pci_device_id', 0):02x}.0"
           if isinstance(bus, int) else None)
    return uuid, pci


def _visible_index() -> int:
    """The first entry of CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES as an index (0 otherwise)."""
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        first = os.environ.get(name, "").split(",")[0].strip()
        if first.isdigit():
            return int(first)
    return 0


def _nvml_backend() -> tuple[Optional[NvmlBackend], str]:
    try:
        import pynvml
    except ImportError:
        return None, f"not available: nvidia-ml-py is not installed ({INSTALL})"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return None, f"not available: NVML did not start ({str(exc)[:80] or type(exc).__name__})"
    uuid, pci = _torch_gpu_ids()
    handle = None
    for way, key in (("nvmlDeviceGetHandleByUUID", uuid), ("nvmlDeviceGetHandleByPciBusId", pci)):
        if key and handle is None:
            try:
                handle = getattr(pynvml, way)(key)
            except Exception:  # noqa: BLE001 - try the next way
                handle = None
    if handle is None:
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(_visible_index())
        except Exception as exc:  # noqa: BLE001
            return None, f"not available: NVML found no handle for this GPU ({str(exc)[:80]})"
    return NvmlBackend(pynvml, handle), "NVML"


def _amdsmi_backend() -> tuple[Optional[AmdSmiBackend], str]:
    try:
        import amdsmi
    except ImportError:
        return None, "not available: amdsmi is not installed (ROCm's Python bindings)"
    try:
        amdsmi.amdsmi_init()
        handles = amdsmi.amdsmi_get_processor_handles()
    except Exception as exc:  # noqa: BLE001
        return None, f"not available: amdsmi did not start ({str(exc)[:80]})"
    _, pci = _torch_gpu_ids()
    for handle in handles:
        try:
            if pci and str(amdsmi.amdsmi_get_gpu_device_bdf(handle)).lower() == pci.lower():
                return AmdSmiBackend(amdsmi, handle), "amdsmi"
        except Exception:  # noqa: BLE001
            pass
    index = _visible_index()
    if index >= len(handles):
        return None, "not available: amdsmi lists no such GPU"
    return AmdSmiBackend(amdsmi, handles[index]), "amdsmi"


def open_watch(vendor: str, is_gpu: bool) -> "Watch":
    """The watch for this process's GPU (`vendor` as DeviceInfo names it); one that says why it is
    not available when there is no GPU, no library or no driver."""
    if not is_gpu:
        return Watch(None, "not available: no GPU")
    backend, note = {"nvidia": _nvml_backend, "amd": _amdsmi_backend}.get(
        vendor, lambda: (None, f"not available on {vendor} GPUs"))()
    return Watch(backend, note)


# ---------------------------------------------------------------- the watch
class Watch:
    """The gauges of one GPU over a run: `case()` watches one benchmark case's timed calls."""

    def __init__(self, backend: Any, note: str):
        self.backend, self.note = backend, note
        self.run_max: dict[str, float] = {}  # the highest SM / memory clock seen in the run so far
        self._probe: Optional[tuple[float, Optional[float]]] = None  # (counter period s, idle W)

    @property
    def available(self) -> bool:
        return self.backend is not None

    def facts(self) -> dict[str, Any]:
        """What the GPU says of itself (name, driver, max clocks, power limit) for the replay bundle."""
        return {"watch": self.note, **(self.backend.facts() if self.backend is not None else {})}

    def case(self) -> "CaseWatch":
        return CaseWatch(self)

    # -- energy
    def energy(self) -> Optional["EnergyReading"]:
        """The energy counter now (None where the GPU has none)."""
        mj = self.backend.energy_mj() if self.backend is not None else None
        return EnergyReading(mj, time.perf_counter()) if mj is not None else None

    def counter_period(self, probe_s: float = PERIOD_PROBE_S, sleep: Callable[[float], None] = time.sleep,
                       clock: Callable[[], float] = time.perf_counter) -> float:
        """How often the energy counter moves, in seconds (energy.py, `probe_counter`: once per run,
        at its start where --energy is asked for, for at most `probe_s`)."""
        if self._probe is None:
            self._probe = probe_counter(self.backend.energy_mj, probe_s, sleep, clock)
        return self._probe[0]

    def idle_watts(self) -> Optional[float]:
        """What the GPU drew while the counter's period was measured (None where it did not move)."""
        self.counter_period()
        return self._probe[1]


class CaseWatch:
    """One case's samples: `tick()` after each timed call, `finish()` after the last."""

    def __init__(self, watch: Watch):
        self.watch = watch
        self.samples: list[Sample] = [watch.backend.sample()] if watch.available else []

    def tick(self) -> None:
        if self.samples and time.monotonic() - self.samples[-1].t >= SAMPLE_EVERY_S:
            self.samples.append(self.watch.backend.sample())

    def finish(self) -> tuple[dict[str, Any], tuple[str, ...]]:
        """The case's clocks as plain data (CaseResult.clocks) and its warnings."""
        if not self.samples:
            return {}, ()
        self.samples.append(self.watch.backend.sample())
        clocks, warnings = summarize(self.samples, dict(self.watch.run_max))
        for key in ("sm_mhz", "mem_mhz"):
            seen = [getattr(s, key) for s in self.samples if getattr(s, key) is not None]
            if seen:
                self.watch.run_max[key] = max(self.watch.run_max.get(key, 0.0), *seen)
        return clocks, warnings


def summarize(samples: Sequence[Sample], run_max: dict[str, float]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """A case's samples as CaseResult.clocks ({"sm_mhz": [first, least, last], "mem_mhz": [...],
    "temp_c_max", "power_w_max", "throttle": [names], "power_capped_ms", "thermal_capped_ms",
    "samples"}) and its warnings: a clock that fell more than CLOCK_FALL below the highest seen
    before it (this case's earlier samples, or `run_max` of the run's earlier cases), and any throttle
    reason that slows a GPU, seen at a sample or in the violation counters."""
    clocks: dict[str, Any] = {"samples": len(samples)}
    warnings = []
    for key, name in (("sm_mhz", "SM"), ("mem_mhz", "memory")):
        values = [getattr(s, key) for s in samples]
        known = [v for v in values if v is not None]
        if not known:
            continue
        clocks[key] = [known[0], min(known), known[-1]]
        highest, fell = run_max.get(key, 0.0), None
        for v in known:
            if v < (1 - CLOCK_FALL) * highest and (fell is None or v < fell[0]):
                fell = (v, highest)
            highest = max(highest, v)
        if fell:
            warnings.append(f"clocks: {name} clock fell to {fell[0]:.0f} MHz during the timed calls, "
                            f"{1 - fell[0] / fell[1]:.0%} below {fell[1]:.0f} MHz")
    for key, out in (("temp_c", "temp_c_max"), ("power_w", "power_w_max")):
        known = [getattr(s, key) for s in samples if getattr(s, key) is not None]
        if known:
            clocks[out] = max(known)
    bits = 0
    for s in samples:
        bits |= s.reasons
    throttle = reason_names(bits)
    for key, name in (("power_capped_ns", "power cap"), ("thermal_capped_ns", "thermal slowdown")):
        ends = [getattr(s, key) for s in (samples[0], samples[-1])]
        if None not in ends and ends[1] > ends[0]:
            clocks[key.replace("_ns", "_ms")] = round((ends[1] - ends[0]) / 1e6, 3)
            if name not in throttle:
                throttle.append(name)
    clocks["throttle"] = throttle
    if throttle:
        capped = [f"{clocks[k]:g} ms {w}" for k, w in (("power_capped_ms", "power-capped"),
                                                       ("thermal_capped_ms", "thermal-capped")) if k in clocks]
        warnings.append(f"throttled: {', '.join(throttle)} during the timed calls"
                        + (f" ({'; '.join(capped)})" if capped else ""))
    return clocks, tuple(warnings)


CLOCK_WARNINGS = ("clocks:", "throttled:")


def run_line(cases: Sequence[tuple[str, Any]], note: str = "") -> Optional[str]:
    """One line for a run's watched cases ((name, CaseResult) pairs): "clocks steady: SM a–b MHz,
    memory c MHz, max T °C, max P W", or how many cases were flagged and the first one's warning;
    "clock watch: <note>" when no case was watched (None when there is neither)."""
    watched = [(name, c) for name, c in cases if c.clocks]
    if not watched:
        return f"clock watch: {note}" if note else None

    def spread(key: str, name: str) -> list[str]:
        values = [v for _, c in watched for v in c.clocks.get(key, [])]
        if not values:
            return []
        lo, hi = min(values), max(values)
        return [f"{name} {lo:.0f} MHz" if lo == hi else f"{name} {lo:.0f}–{hi:.0f} MHz"]

    temps = [c.clocks["temp_c_max"] for _, c in watched if "temp_c_max" in c.clocks]
    watts = [c.clocks["power_w_max"] for _, c in watched if "power_w_max" in c.clocks]
    gauges = ", ".join(spread("sm_mhz", "SM") + spread("mem_mhz", "memory")
                       + ([f"max {max(temps):.0f} °C"] if temps else []) + ([f"max {max(watts):.0f} W"] if watts else [])
                       ) or "no gauges read"
    flagged = [(name, w) for name, c in watched for w in c.warnings if w.startswith(CLOCK_WARNINGS)]
    if not flagged:
        return f"clocks steady: {gauges} ({len(watched)} case(s) watched)"
    cases_flagged = len({name for name, _ in flagged})
    name, first = flagged[0]
    return f"clocks NOT steady in {cases_flagged} of {len(watched)} cases ({name}: {first}); {gauges}"
