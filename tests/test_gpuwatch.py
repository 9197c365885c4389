"""The clock and throttle watch and the energy per call (issue 41), on the CPU with a fake NVML
(sys.modules["pynvml"]) and a fake amdsmi: a case whose SM clock fell or that throttled is flagged,
idle and clock settings are not, a run says in one line whether its clocks were steady, and energy
comes from the counter's deltas, with the harness's own work subtracted, or "too short to measure"."""

import dataclasses
import sys
import types

import pytest

from harness.parent import gpuwatch
from harness.parent.gpuwatch import EnergyBlock, Sample, Watch, energy_per_call, open_watch, run_line, summarize
from harness.results import CaseResult


class FakeNvml(types.ModuleType):
    """pynvml's functions over a script of readings: each sample takes the next reading (the last one
    repeats); the energy counter is `watts` integrated over a clock the test moves, in `step_s` steps."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0
    NVML_PERF_POLICY_POWER, NVML_PERF_POLICY_THERMAL = 0, 1

    def __init__(self, readings=(), watts=300.0, step_s=0.02, fail_init=False):
        super().__init__("pynvml")
        self.readings, self.i = list(readings) or [{}], -1
        self.watts, self.step_s, self.now, self.fail_init = watts, step_s, 0.0, fail_init

    def _r(self, key, default):
        return self.readings[min(self.i, len(self.readings) - 1)].get(key, default)

    def nvmlInit(self):
        if self.fail_init:
            raise RuntimeError("NVML Shared Library Not Found")

    def nvmlDeviceGetHandleByIndex(self, index):
        return ("gpu", index)

    def nvmlDeviceGetClockInfo(self, handle, kind):
        if kind == self.NVML_CLOCK_SM:
            self.i += 1  # (the watch reads the SM clock first: one reading per sample)
            return self._r("sm", 1980)
        return self._r("mem", 3201)

    def nvmlDeviceGetTemperature(self, handle, sensor):
        return self._r("temp", 45)

    def nvmlDeviceGetPowerUsage(self, handle):
        return self._r("mw", 300_000)

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return self._r("reasons", 0)

    def nvmlDeviceGetViolationStatus(self, handle, policy):
        key = "power_ns" if policy == self.NVML_PERF_POLICY_POWER else "thermal_ns"
        return types.SimpleNamespace(referenceTime=0, violationTime=self._r(key, 0))

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        return int(self.now // self.step_s * self.step_s * self.watts * 1e3)  # mJ, moved in steps

    def nvmlDeviceGetName(self, handle):
        return b"NVIDIA H200"

    def nvmlSystemGetDriverVersion(self):
        return "570.86.15"

    def nvmlSystemGetCudaDriverVersion(self):
        return 12080


@pytest.fixture
def nvml(monkeypatch):
    def install(**kw):
        fake = FakeNvml(**kw)
        monkeypatch.setitem(sys.modules, "pynvml", fake)
        return fake
    return install


def watched(watch: Watch, ticks: int = 0) -> tuple[dict, tuple]:
    case = watch.case()
    for _ in range(ticks):
        case.samples[-1] = dataclasses.replace(case.samples[-1], t=-1e9)  # old enough: the next tick samples
        case.tick()
    return case.finish()


def test_without_nvidia_ml_py_the_watch_is_not_available(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    watch = open_watch("nvidia", True)
    assert not watch.available and watch.note.startswith("not available: nvidia-ml-py is not installed")
    assert "mla-eval[gpu]" in watch.note and watch.case().finish() == ({}, ()) and watch.energy() is None
    assert open_watch("cpu", False).note == "not available: no GPU"
    assert run_line([], watch.note) == f"clock watch: {watch.note}"


def test_nvml_that_does_not_start_is_not_available(nvml):
    nvml(fail_init=True)
    assert open_watch("nvidia", True).note == "not available: NVML did not start (NVML Shared Library Not Found)"


def test_steady_clocks_give_no_warning_and_a_steady_line(nvml):
    nvml(readings=[{"reasons": 0x1}, {"reasons": 0x2}, {}])  # idle, application clocks: not throttling
    watch = open_watch("nvidia", True)
    assert watch.available and watch.facts()["gpu"] == "NVIDIA H200" and watch.facts()["cuda_driver"] == "12.8"
    clocks, warnings = watched(watch, ticks=1)
    assert warnings == () and clocks["sm_mhz"] == [1980, 1980, 1980] and clocks["throttle"] == []
    case = CaseResult("benchmark", 0, "b0", True, clocks=clocks)
    assert run_line([("a.py 4×1k", case)]) == ("clocks steady: SM 1980 MHz, memory 3201 MHz, max 45 °C, max 300 W "
                                               "(1 case(s) watched)")


def test_a_clock_that_fell_or_a_throttle_reason_flags_the_case(nvml):
    nvml(readings=[{}, {"sm": 1650, "reasons": 0x4 | 0x1, "temp": 83}, {"sm": 1700}])
    watch = open_watch("nvidia", True)
    clocks, warnings = watched(watch, ticks=1)
    assert warnings == ("clocks: SM clock fell to 1650 MHz during the timed calls, 17% below 1980 MHz",
                        "throttled: power cap during the timed calls")
    assert clocks["sm_mhz"] == [1980, 1650, 1700] and clocks["temp_c_max"] == 83
    case = CaseResult("benchmark", 0, "b0", True, clocks=clocks, warnings=warnings)
    steady = CaseResult("benchmark", 1, "b1", True, clocks={"sm_mhz": [1980, 1980, 1980]})
    line = run_line([("a.py 4×1k", case), ("a.py 4×8k", steady)])
    assert line.startswith("clocks NOT steady in 1 of 2 cases (a.py 4×1k: clocks: SM clock fell to 1650 MHz")


def test_a_fall_from_the_runs_earlier_cases_is_flagged_too(nvml):
    nvml(readings=[{"sm": 1980}, {"sm": 1980}, {"sm": 1700}, {"sm": 1700}])
    watch = open_watch("nvidia", True)
    assert watched(watch)[1] == ()
    assert watched(watch)[1] == ("clocks: SM clock fell to 1700 MHz during the timed calls, 14% below 1980 MHz",)


def test_a_cap_between_samples_shows_in_the_violation_counters(nvml):
    nvml(readings=[{"thermal_ns": 10_000_000}, {"thermal_ns": 35_000_000}])
    clocks, warnings = watched(open_watch("nvidia", True))
    assert clocks["thermal_capped_ms"] == 25.0
    assert warnings == ("throttled: thermal slowdown during the timed calls (25 ms thermal-capped)",)


def test_amdsmi_is_read_where_present(monkeypatch):
    fake = types.ModuleType("amdsmi")
    fake.AmdSmiClkType = types.SimpleNamespace(GFX="gfx", MEM="mem")
    fake.AmdSmiTemperatureType = types.SimpleNamespace(HOTSPOT="hotspot")
    fake.AmdSmiTemperatureMetric = types.SimpleNamespace(CURRENT="current")
    fake.amdsmi_init = lambda: None
    fake.amdsmi_get_processor_handles = lambda: ["h0"]
    fake.amdsmi_get_clock_info = lambda h, kind: {"clk": 2100 if kind == "gfx" else 1300}
    fake.amdsmi_get_temp_metric = lambda h, kind, metric: 61
    fake.amdsmi_get_power_info = lambda h: {"current_socket_power": 540}
    fake.amdsmi_get_gpu_metrics_info = lambda h: {"throttle_status": 0}
    fake.amdsmi_get_energy_count = lambda h: {"energy_accumulator": 1000, "counter_resolution": 15.3}
    monkeypatch.setitem(sys.modules, "amdsmi", fake)
    watch = open_watch("amd", True)
    clocks, warnings = watched(watch)
    assert watch.note == "amdsmi" and warnings == () and clocks["sm_mhz"] == [2100.0] * 3
    assert clocks["power_w_max"] == 540 and watch.energy().mj == pytest.approx(15.3)
    monkeypatch.setitem(sys.modules, "amdsmi", None)
    assert open_watch("amd", True).note.startswith("not available: amdsmi is not installed")


# ---------------------------------------------------------------- energy
def test_the_counter_period_is_measured_from_its_steps(nvml):
    fake = nvml(step_s=0.02)
    watch = open_watch("nvidia", True)

    def sleep(seconds):  # the fake's clock moves with the watch's polling (and the real clock, barely)
        fake.now += 0.001

    assert watch.counter_period(sleep=sleep, clock=lambda: fake.now) == pytest.approx(0.02, abs=0.0015)
    assert watch.counter_period() == watch.counter_period(sleep=sleep)  # measured once per run


def test_energy_per_call_is_the_calls_block_less_the_harness_block():
    # 100 calls of 50 µs at 500 W over a 1 s block at 120 W otherwise; the harness block: 1 s - 5 ms at 120 W
    calls = EnergyBlock(mj=(0.995 * 120 + 0.005 * 500) * 1e3, seconds=1.0)
    harness = EnergyBlock(mj=0.995 * 120 * 1e3, seconds=0.995)
    joules, bound, note = energy_per_call(calls, harness, 100, period=0.001)
    assert joules == pytest.approx(0.005 * 500 / 100) and note == ""  # 25 mJ per call: the calls alone
    assert bound == pytest.approx(2 * 0.1215 * 0.001 / 0.1, rel=0.01)  # one counter step at each block's end
    short = energy_per_call(EnergyBlock(10.0, 0.05), harness, 10, period=0.02)
    assert short[:2] == (None, None) and short[2].startswith("too short to measure: the timed calls took 50 ms")
    noise = energy_per_call(calls, EnergyBlock(calls.mj - 1, 0.995), 100, period=0.05)
    assert noise[0] is None and noise[2].startswith("below the counter's resolution")


def test_paced_spreads_the_harness_work_over_the_calls_time():
    now = [0.0]
    starts = []

    def sleep(seconds):
        now[0] += max(seconds, 1e-4)

    gpuwatch.paced(lambda: starts.append(now[0]), 4, 0.4, clock=lambda: now[0], sleep=sleep)
    assert [round(t, 2) for t in starts] == [0.0, 0.1, 0.2, 0.3] and now[0] >= 0.4


def test_summarize_without_gauges_is_empty():
    assert summarize([Sample(0.0), Sample(1.0)], {}) == ({"samples": 2, "throttle": []}, ())


class FakeGpu:
    """A backend whose SM clock falls after `fall_after` samples and whose energy counter moves in
    `step_s` steps at 100 W, plus 400 W more during each call (`call(seconds)`)."""

    def __init__(self, fall_after=1, step_s=0.002):
        self.samples, self.fall_after, self.step_s = 0, fall_after, step_s
        self.start, self.call_mj = gpuwatch.time.perf_counter(), 0.0

    def sample(self):
        self.samples += 1
        return Sample(gpuwatch.time.monotonic(), 1980 if self.samples <= self.fall_after else 1500, 3201, 50, 350.0)

    def call(self, seconds):
        self.call_mj += 400 * seconds * 1e3

    def energy_mj(self):
        elapsed = gpuwatch.time.perf_counter() - self.start
        return 100 * (elapsed // self.step_s * self.step_s) * 1e3 + self.call_mj

    def facts(self):
        return {}


def test_the_engine_flags_a_case_whose_clock_fell_and_measures_its_energy(problem):
    """The engine's benchmark loop with a fake GPU: the watch's samples and warning land on the case;
    --energy's block A (the calls, 0.5 ms each at 500 W) less block B (the harness alone) leaves the
    calls' 0.25 J each, within the counter's bound."""
    import time

    from conftest import gpu_case_inputs

    from harness.parent.case import PhaseClock
    from harness.parent.engine import _benchmark_case
    from harness.timing import CallTiming
    from harness.task.verdict import Verdict

    gpu = FakeGpu()

    def call(timed, deadline):
        time.sleep(0.002)  # the harness's work around the call, and the call
        if timed:
            gpu.call(0.0005)
        return Verdict(True, "matches"), CallTiming(0.0005, 1e-4, 0.0, ())

    inputs = gpu_case_inputs(problem.spec, call)
    inputs.ctx.watch, inputs.ctx.energy = Watch(gpu, "NVML"), True
    inputs.clock, inputs.harness_only = PhaseClock({}), lambda seed: time.sleep(0.0008)
    result = _benchmark_case(inputs, "bf16", lambda *a, **k: None)
    assert result.ok and result.clocks["sm_mhz"] == [1980, 1500, 1500]
    assert "clocks: SM clock fell to 1500 MHz during the timed calls, 24% below 1980 MHz" in result.warnings
    assert len(result.samples) > problem.spec.timing.max_runs  # the calls went on for the energy counter
    assert result.energy_note == "" and result.energy_j == pytest.approx(0.25, abs=result.energy_err_j + 0.03)
    assert "energy" in inputs.clock.phases
