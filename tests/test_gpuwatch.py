"""The clock and throttle watch and the energy per call (issue 41), on the CPU with a fake NVML
(sys.modules["pynvml"]) and a fake amdsmi: a case whose SM clock fell or that throttled is flagged,
idle and clock settings are not, a run says in one line whether its clocks were steady, and energy
comes from the counter's change over a burst of calls back to back, or a note why not."""

import dataclasses
import sys
import types

import pytest
from conftest import ROOT

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
def test_the_counter_period_and_the_idle_power_are_measured_from_its_steps(nvml):
    fake = nvml(step_s=0.02, watts=80.0)
    watch = open_watch("nvidia", True)

    def sleep(seconds):  # the fake's clock moves with the watch's polling (and the real clock, barely)
        fake.now += 0.001

    assert watch.counter_period(sleep=sleep, clock=lambda: fake.now) == pytest.approx(0.02, abs=0.0015)
    assert watch.idle_watts() == pytest.approx(80.0, rel=0.02)
    assert watch.counter_period() == watch.counter_period(sleep=sleep)  # measured once per run


def test_a_counter_that_does_not_move_gives_the_probes_length_and_no_idle_power():
    from harness.parent.energy import probe_counter

    now = [0.0]
    assert probe_counter(lambda: 5.0, 0.1, lambda s: now.__setitem__(0, now[0] + 0.01), lambda: now[0]) == (0.1, None)


def test_energy_per_call_is_the_bursts_counter_change_per_call():
    # 6,000 calls of 0.5 ms back to back over 3 s at 500 W: 0.25 J each
    burst = EnergyBlock(mj=500 * 3.0 * 1e3, seconds=3.0)
    joules, bound, note = energy_per_call(burst, 6000, period=0.1, ranked_s=0.0006)
    assert joules == pytest.approx(0.25) and note == ""
    assert bound == pytest.approx(2 * 500 * 0.1 / 6000)  # one counter step at each end, per call
    short = energy_per_call(EnergyBlock(50.0, 0.5), 1000, period=0.1, ranked_s=0.0005)
    assert short[:2] == (None, None) and short[2].startswith("too short to measure: the burst took 500 ms")
    # a count (or cached work) the ranked calls do not stand behind: 3 s "holding" 60,000 calls of 1 ms
    cached = energy_per_call(burst, 60000, period=0.1, ranked_s=0.001)
    assert cached[:2] == (None, None) and cached[2].startswith("not measured: the burst's 60000 calls took 50.0 µs each, under 25% of")
    still = energy_per_call(EnergyBlock(0.0, 3.0), 6000, period=0.1, ranked_s=0.0005)
    assert still == (None, None, "not measured: the burst drew 0 W")
    # a worker that idles through the burst and answers from a cache, its count under the floor's
    idle = energy_per_call(EnergyBlock(75 * 3.0 * 1e3, 3.0), 6000, period=0.1, ranked_s=0.0006, idle_w=70.0)
    assert idle == (None, None, "not measured: the burst drew 75 W, the idle GPU 70 W")
    assert energy_per_call(burst, 6000, 0.1, 0.0006, idle_w=70.0)[2] == ""
    # no ranked device time to hold the count to (a GPU's is never zero): no figure
    assert energy_per_call(burst, 6000, 0.1, 0.0)[2].startswith("not measured: the burst's 6000 calls")
    assert energy_per_call(burst, 0, 0.1, 0.0005)[2] == "no calls in the burst"


def test_a_burst_is_sized_by_the_counters_period():
    from harness.parent.energy import BURST_MAX_S, BURST_PERIODS, burst_seconds

    assert burst_seconds(0.02) == pytest.approx(BURST_PERIODS * 0.02) and burst_seconds(1.0) == BURST_MAX_S


def test_the_workers_burst_counts_its_calls_and_returns_the_last_output():
    """The worker's side (CPU): calls back to back until the burst's time is up, the last output
    returned, device_s the mean wall time per call."""
    from harness.worker.timer import CallTimer

    seen = []

    def kernel(data):
        seen.append(data)
        return len(seen)

    out, timing = CallTimer("cpu", 0).diagnose(kernel, "inputs", "burst", 0.02)
    assert timing["calls"] == len(seen) == out > 1 and set(seen) == {"inputs"}
    assert timing["device_s"] == pytest.approx(0.02 / out, rel=0.5)


def test_summarize_without_gauges_is_empty():
    assert summarize([Sample(0.0), Sample(1.0)], {}) == ({"samples": 2, "throttle": []}, ())


class FakeGpu:
    """A backend whose SM clock falls after `fall_after` samples and whose energy counter moves in
    `step_s` steps at 100 W, plus 400 W more while calls run (`call(seconds)`)."""

    def __init__(self, fall_after=1, step_s=0.002):
        self.samples, self.fall_after, self.step_s = 0, fall_after, step_s
        self.start, self.call_mj = gpuwatch.time.perf_counter(), 0.0
        self.awake_w, self.awake_from, self.broken = 0.0, 0.0, False  # (`wake`, and a counter that stops answering)

    def wake(self, watts):
        """From now on the GPU draws `watts` more (out of its idle state)."""
        self.awake_w, self.awake_from = watts, gpuwatch.time.perf_counter() - self.start

    def sample(self):
        self.samples += 1
        return Sample(gpuwatch.time.monotonic(), 1980 if self.samples <= self.fall_after else 1500, 3201, 50, 350.0)

    def call(self, seconds):
        self.call_mj += 400 * seconds * 1e3

    def energy_mj(self):
        if self.broken:
            return None
        stepped = (gpuwatch.time.perf_counter() - self.start) // self.step_s * self.step_s
        return (100 * stepped + self.awake_w * max(0.0, stepped - self.awake_from)) * 1e3 + self.call_mj

    def facts(self):
        return {}


def _fake_gpu_case(problem, gpu, burst_count=lambda seconds: round(seconds / 0.0005), after_burst=lambda: None):
    """A benchmark case on the fake GPU: timed calls of 0.5 ms (2 ms of the harness's work around
    each), and a burst whose calls run back to back at 0.5 ms each (`burst_count`: the count the
    worker reports for a burst of that long)."""
    import time

    from conftest import gpu_case_inputs

    from harness.parent.case import PhaseClock
    from harness.timing import CallTiming
    from harness.task.verdict import Verdict

    bursts = []

    def call(timed, deadline, method=None, burst_s=0.0, replied=None):
        if method == "burst":
            time.sleep(burst_s)
            gpu.call(burst_s)
            bursts.append(burst_s)
            after_burst()
            replied()
            count = burst_count(burst_s)
            return Verdict(True, "matches"), CallTiming(burst_s / count, 0.0, 0.0, (), calls=count)
        time.sleep(0.002)  # the harness's work around the call, and the call
        if timed:
            gpu.call(0.0005)
        return Verdict(True, "matches"), CallTiming(0.0005, 1e-4, 0.0, ())

    inputs = gpu_case_inputs(problem.spec, call)
    inputs.ctx.watch, inputs.ctx.energy = Watch(gpu, "NVML"), True
    inputs.clock = PhaseClock({})
    return inputs, bursts


def test_the_engine_flags_a_case_whose_clock_fell_and_measures_its_energy(problem):
    """The engine's benchmark loop with a fake GPU: the watch's samples and warning land on the case;
    --energy's burst of calls back to back (0.5 ms each at 500 W) gives 0.25 J each, within the
    counter's bound, and the timed calls are as many as without it."""
    from harness.parent.energy import burst_seconds
    from harness.parent.engine import _benchmark_case

    gpu = FakeGpu()
    inputs, bursts = _fake_gpu_case(problem, gpu)
    result = _benchmark_case(inputs, "bf16", lambda *a, **k: None)
    assert result.ok and result.clocks["sm_mhz"] == [1980, 1500, 1500]
    assert "clocks: SM clock fell to 1500 MHz during the timed calls, 24% below 1980 MHz" in result.warnings
    assert len(result.samples) <= problem.spec.timing.max_runs
    assert bursts == [pytest.approx(burst_seconds(inputs.ctx.watch.counter_period()))]
    assert result.energy_note == "" and result.energy_j == pytest.approx(0.25, abs=result.energy_err_j + 0.03)
    assert "energy" in inputs.clock.phases


def test_a_burst_that_claims_more_calls_than_its_time_holds_gives_no_energy(problem):
    """A worker that counts ten times the calls it ran (or answers them from a cache) would divide
    the burst's energy by ten: under a quarter of the ranked median per call, no figure."""
    from harness.parent.engine import _benchmark_case

    inputs, _ = _fake_gpu_case(problem, FakeGpu(fall_after=99), burst_count=lambda seconds: round(seconds / 0.00005))
    result = _benchmark_case(inputs, "bf16", lambda *a, **k: None)
    assert result.ok and result.energy_j is None and result.energy_note.startswith("not measured: the burst's ")


@pytest.mark.slow  # a worker, two CPU cases
def test_energy_bursts_run_in_a_real_worker_and_every_case_gets_a_figure(problem, cpu, tmp_path):
    """--energy end to end on the CPU: the engine asks a real worker for a burst per benchmark case,
    the worker counts its calls back to back, the parent judges the last output and divides the fake
    counter's change (400 W once awake, 100 W idle) by the count."""
    import dataclasses as dc

    from harness.config import RunConfig, RunContext
    from harness.parent.engine import evaluate
    from harness.report import export_rows

    spec = dc.replace(problem.spec, timing=dc.replace(problem.spec.timing, max_seconds=0.05, max_runs=5))
    ctx = RunContext(dc.replace(problem, spec=spec), cpu, RunConfig(small=True, logs=str(tmp_path), energy=True),
                     watch=Watch(FakeGpu(fall_after=99, step_s=0.005), "NVML"))
    ctx.watch.counter_period()  # (as the run's start does: the idle GPU, 100 W)
    ctx.watch.backend.wake(300.0)
    result = evaluate(ROOT / "submissions" / "torch_batched.py", ctx, "benchmark")
    assert result.ok, result.error or [c.reason for c in result.cases if not c.ok]
    timed = [c for c in result.cases if c.kind == "benchmark"]
    assert timed and all(c.energy_note == "" and c.energy_j > 0 for c in timed), [c.energy_note for c in timed]
    rows = export_rows([result], lambda args: "c", None)
    assert [r["energy_mj"] for r in rows if r["kind"] == "benchmark"] == [c.energy_j * 1e3 for c in timed]


def test_a_counter_that_stops_answering_gives_a_note_not_a_lost_result(problem):
    from harness.parent.engine import _benchmark_case

    gpu = FakeGpu(fall_after=99)
    inputs, _ = _fake_gpu_case(problem, gpu, after_burst=lambda: setattr(gpu, "broken", True))
    result = _benchmark_case(inputs, "bf16", lambda *a, **k: None)
    assert result.ok and result.energy_j is None and result.energy_note == "not measured: the energy counter did not answer"


def test_energy_needs_a_gpu_per_evaluator():
    from harness.cli.run_parallel import pool_plan
    from harness.config import RunConfig, UsageError

    two = type("Device", (), {"is_gpu": True, "count": 2})()
    assert pool_plan(RunConfig(energy=True, gpus="2", workers=2), two) == (2, 2)
    with pytest.raises(UsageError, match="--energy: 4 evaluators would share 2 GPU"):
        pool_plan(RunConfig(energy=True, gpus="2", workers=4), two)
