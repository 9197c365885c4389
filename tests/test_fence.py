"""The fenced timing's parent side on the CPU: a fake fence stands in for the GPU's flags and events,
a fake worker's replies for the channel, so the code that decides which number ranks runs here. The
real fence runs on the H200 (lab/h200_fence.sh, BENCHMARKS.md)."""
import ctypes
import dataclasses
import math
import statistics
import types
from pathlib import Path

import pytest
import torch
from conftest import gpu_case_inputs

from harness.parent import sandbox
from harness.parent.fence import CENSUS_MAX_S, Fence, Reading, first_input
from harness.timing import CallTiming


class FakeFence:
    """The parent's clock: reads `call_s` for every call, whatever the worker says."""

    held = staticmethod(Fence.held)  # the real fence's judgement of a reading

    def __init__(self, call_s: float):
        self.call_s, self.seq, self.released, self.refilled = call_s, 0, [], 0

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def run(self, seq, refill_rest, first, slot, snapshot, deadline, watch_s=None):
        refill_rest()
        first[0].copy_(first[1])
        self.refilled += 1
        snapshot.copy_(slot)
        return Reading(self.call_s + 5e-6, self.call_s)

    def release(self, seq: int) -> None:
        self.released.append(seq)

    def watch_verdict(self, snapshot, deadline):
        return True, 0


def fence_reading(**fields) -> FakeFence:
    """A fake fence (132 SMs) whose readings carry `fields` (a census's findings)."""

    class Fence_(FakeFence):
        census = types.SimpleNamespace(sms=132)

        def run(self, seq, refill_rest, first, slot, snapshot, deadline, watch_s=None):
            return dataclasses.replace(super().run(seq, refill_rest, first, slot, snapshot, deadline, watch_s),
                                       **fields)

    return Fence_(1e-5)


def fenced_box(replies: list[dict], fence: FakeFence, slot: torch.Tensor, on_wait=lambda: None):
    box = object.__new__(sandbox.Sandbox)
    box.device = types.SimpleNamespace(type="cpu", is_gpu=False)
    box.fence, box._slot, box._enqueue_times = fence, slot, []
    sent = []
    box._send = lambda msg, fds=(), ready=True: sent.append(msg["op"])
    answers = iter(replies)

    def answer(timeout, what, op):
        reply = next(answers)
        if reply.get("op") == "error":
            raise sandbox.WorkerFailure("exception", reply["message"])
        assert reply["op"] == op
        return reply

    box._answer = answer
    box.worker = types.SimpleNamespace(channel=types.SimpleNamespace(wait_readable=lambda s: (on_wait(), True)[1]))
    return box, sent


@pytest.fixture(autouse=True)
def no_cuda_sync(monkeypatch):
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)


def forged(shape, **times) -> list[dict]:
    layout = {"shape": list(shape), "dtype": "bfloat16", "device": "cpu"}
    return [{"op": "enqueued", "copied": True, "layout": layout, "host_s": 1e-9},
            {"op": "output", "copied": True, "layout": layout, "device_s": 1e-9, "host_s": 1e-9, "tail_s": 0.0,
             "replaced": [], "caught_up": False, **times}]


def test_the_ranked_time_is_the_parents_whatever_the_worker_replies():
    """A worker that rewrites its replies (its own events, its host time) moves no ranked number:
    device_s is the fence's reading, whatever the worker's reply says."""
    slot = torch.full((2, 3), 7.0, dtype=torch.bfloat16)
    fence = FakeFence(40e-6)
    q, fresh_q = torch.zeros(4), torch.ones(4)
    box, sent = fenced_box(forged(slot.shape, device_s=1e-9), fence, slot)
    out, timing = box.fenced_call(lambda: None, (q, fresh_q), timeout=5)
    assert timing.device_s == 40e-6
    assert sent == ["call", "collect"] and fence.refilled == 1 and torch.equal(q, fresh_q)
    assert out.data_ptr() != slot.data_ptr()  # the parent judges its own snapshot, not the shared slot


def test_a_call_that_never_enqueues_in_time_is_launch_bound_and_still_timed_by_the_parent():
    slot = torch.zeros((2, 3), dtype=torch.bfloat16)
    box, _ = fenced_box(forged(slot.shape), FakeFence(90e-6), slot)
    box.worker.channel.wait_readable = lambda s: False  # (a call that reads .tolist() waits for the gate)
    _, timing = box.fenced_call(lambda: None, (torch.zeros(1), torch.ones(1)), timeout=5)
    assert timing.caught_up and timing.device_s == 90e-6


def test_a_failing_call_releases_the_parents_stream():
    slot = torch.zeros((2, 3), dtype=torch.bfloat16)
    fence = FakeFence(1e-5)
    box, _ = fenced_box([{"op": "error", "message": "boom"}], fence, slot)
    with pytest.raises(sandbox.WorkerFailure):
        box.fenced_call(lambda: None, (torch.zeros(1), torch.ones(1)), timeout=5)
    assert fence.released == [1]


def test_the_first_input_is_written_after_the_clock_starts():
    shared = (torch.zeros(2), {"kv": torch.zeros(3)}, torch.zeros(1))
    fresh = (torch.ones(2), {"kv": torch.ones(3)}, torch.ones(1))
    from harness.task.verdict import tensors

    rest, first = first_input(shared, fresh, tensors)
    assert first[0] is shared[0] and first[1] is fresh[0]
    assert [dst for dst, _ in rest] == [shared[1]["kv"], shared[2]]


def test_the_engine_ranks_the_fences_numbers_and_keeps_the_workers_apart(problem):
    """Engine level: the case's ranked medians are the fence's readings, its `kernel` statistics the
    worker's own event-timed calls made after them (here forged a thousand times smaller), and the
    export carries both."""
    from harness.parent.engine import _benchmark_case
    from harness.report import export_rows
    from harness.results import SubmissionResult
    from harness.task.verdict import Verdict

    spec = dataclasses.replace(problem.spec, timing=dataclasses.replace(problem.spec.timing, max_runs=12))

    methods = []

    def call(timed, deadline, method=None):
        methods.append(method)
        return Verdict(True, "matches"), CallTiming(50e-9 if method == "events" else 50e-6, 1e-4, 0.0, ())

    inputs = gpu_case_inputs(spec, call, fenced=True)
    case = _benchmark_case(inputs, "bf16", lambda *a, **k: None)
    assert case.ok and case.device.median == 50e-6 and case.kernel.median == 50e-9
    # its interval holds the subtracted cost's own (1 µs here, every call alike: the calls' own is 0)
    assert case.device.ci_rel == pytest.approx(1e-6 / 50e-6)
    assert methods.count("events") == 5 and methods[-5:] == ["events"] * 5
    assert case.slot_copy_s == pytest.approx(4 * 16 * 512 * 2 * 1e-12)  # the fence's figure for the output's size
    (row,) = export_rows([SubmissionResult("x.py", "0" * 64, cases=[case],
                                           audit="verified: the parent's clock, fenced around each call")],
                         lambda args: "c", None)
    assert row["median_us"] == pytest.approx(50.0) and row["kernel_us"] == pytest.approx(0.05)
    assert row["slot_copy_us"] == pytest.approx(case.slot_copy_s * 1e6)
    # what was subtracted: the fence's cost at the first input's (q) and the output's bytes together
    first_bytes = inputs.data[0].numel() * inputs.data[0].element_size()
    assert case.fence_s == pytest.approx(20e-6 + (first_bytes + 4 * 16 * 512 * 2) * 1e-12)
    assert row["fence_us"] == pytest.approx(case.fence_s * 1e6)
    assert row["timing_verified"] is True


def test_cpu_exports_label_their_numbers_unverified(tmp_path):
    import json

    from conftest import ROOT, cli

    code = cli(tmp_path, "--mode", "benchmark", "--budget", "0.2", "--json", str(tmp_path / "out.json"),
               "--submission", str(ROOT / "submissions" / "torch_batched.py"))
    assert code == 0
    data = json.loads((tmp_path / "out.json").read_text())
    assert data["run"]["ranked_by"].startswith("unverified: CPU")
    assert data["run"]["timing"] == "CPU wall clock, unverified"
    assert all(row["timing_verified"] is False and row["audit"].startswith("unverified") for row in data["rows"])


def test_compare_says_when_two_runs_were_timed_differently():
    from rich.console import Console

    from harness.report import compare_table

    row = {"path": "a.py", "spec": "c", "submission": "a.py", "label": "4×1k", "median_us": 10.0, "ci95_rel": 0.01}
    console = Console(width=200, record=True, file=__import__("io").StringIO())
    console.print(compare_table(1, 2, [{**row, "timing": "fenced (events)"}], [{**row, "timing": "events, unverified"}]))
    text = " ".join(console.export_text().split())
    assert "timed differently (A: fenced (events); B: events, unverified)" in text


def test_a_stream_held_after_a_failed_call_ends_the_worker_then_the_fence():
    """A worker that keeps rewriting DONE (or holds every SM) keeps the parent's stream waiting: the
    parent ends the worker and tries again; where even that fails, no later call is fenced."""
    from harness.parent.fence import FenceError

    class HeldFence(FakeFence):
        def __init__(self, frees_after: int):
            super().__init__(1e-5)
            self.frees_after = frees_after

        def release(self, seq):
            self.released.append(seq)
            if len(self.released) <= self.frees_after:
                raise FenceError("the parent's timing stream was still held 10 s after the call")

    slot = torch.zeros((2, 3), dtype=torch.bfloat16)
    for frees_after, still_fenced in ((1, True), (2, False)):
        fence = HeldFence(frees_after)
        box, _ = fenced_box([{"op": "error", "message": "boom"}], fence, slot)
        killed = []
        box.worker.kill = lambda: killed.append(True)
        with pytest.raises(sandbox.WorkerFailure) as failure:
            box.fenced_call(lambda: None, (torch.zeros(1), torch.ones(1)), timeout=5)
        assert killed == [True] and fence.released == [1, 1]
        assert (box.fence is fence) == still_fenced
    assert str(failure.value) == "boom; then the parent's timing stream was still held 10 s after the call"
    assert failure.value.kind == "timeout" and failure.value.fatal


def test_a_call_whose_census_found_an_sm_held_is_rejected_and_the_worker_ended():
    """A kernel of the worker's still on the GPU when the call begins (loading the KV cache on chip
    before the clock, or waiting on GATE from the SMs) keeps a census block off its SM: the call
    fails with one line, the worker is ended (its kernel with it) and the parent's stream released."""

    class CensusFence(FakeFence):
        census = types.SimpleNamespace(sms=132)

        def run(self, seq, refill_rest, first, slot, snapshot, deadline, watch_s=None):
            return Reading(float("nan"), float("nan"), held=3)

    fence, slot = CensusFence(1e-5), torch.zeros((2, 3), dtype=torch.bfloat16)
    box, sent = fenced_box(forged(slot.shape), fence, slot)
    killed = []
    box.worker.kill = lambda: killed.append(True)
    with pytest.raises(sandbox.WorkerFailure) as failure:
        box.fenced_call(lambda: None, (torch.zeros(1), torch.ones(1)), timeout=5)
    assert failure.value.kind == "held the GPU" and failure.value.fatal
    assert "3 of the census's blocks found their SM held" in str(failure.value) and "\n" not in str(failure.value)
    assert killed == [True] and fence.released == [1] and sent == ["call"]


@pytest.mark.parametrize("census_s, rejected", [(CENSUS_MAX_S * 0.9, False), (CENSUS_MAX_S * 1.1, True),
                                                (2e-3, True)])
def test_a_census_kept_waiting_for_its_sms_rejects_the_call(census_s, rejected):
    """A worker kernel that holds SMs when the census comes keeps its blocks from being placed at all
    (they start their own clocks only once placed, so none misses): the time from the census's
    launch to every block counted in says so, and the call is rejected as if a block had missed."""

    fence, slot = fence_reading(census_s=census_s), torch.zeros((2, 3), dtype=torch.bfloat16)
    box, _ = fenced_box(forged(slot.shape), fence, slot)
    box.worker.kill = lambda: None
    if not rejected:
        box.fenced_call(lambda: None, (torch.zeros(1), torch.ones(1)), timeout=5)
        return
    with pytest.raises(sandbox.WorkerFailure) as failure:
        box.fenced_call(lambda: None, (torch.zeros(1), torch.ones(1)), timeout=5)
    assert failure.value.kind == "held the GPU"
    assert f"the census waited {census_s * 1e6:.0f} µs for SMs held by another kernel" in str(failure.value)


def test_a_ray_task_plans_its_own_fence_and_quits_its_daemon(problem, tmp_path, monkeypatch):
    """A GPU Ray task is timed as any evaluator: the task's own process plans the fence (starting an
    MPS daemon on its node before any CUDA context: run_context -> fence_plan, harness/parent/context.py) and quits that
    daemon when it ends, whatever the evaluation did."""
    from harness.parent import engine, mps, ray_backend
    from harness.config import RunConfig

    events = []
    monkeypatch.setattr(mps, "start", lambda: events.append("start") or None)
    monkeypatch.setattr(mps, "stop", lambda: events.append("stop"))
    from harness.parent import context

    monkeypatch.setattr(context, "run_context", lambda config: events.append(("plan", context.fence_plan(config))) or "ctx")

    def evaluate(path, ctx, mode):
        events.append("evaluate")
        raise RuntimeError("the worker died")

    monkeypatch.setattr(engine, "evaluate", evaluate)
    config = RunConfig(mode="leaderboard", task=str(problem.spec.path), device="cuda", logs=str(tmp_path))
    files = {**ray_backend.task_bundle(Path(problem.spec.path)), "submission/x.py": b"def custom_kernel(d): pass\n"}
    with pytest.raises(RuntimeError):
        ray_backend._job(config, files, "x.py")
    assert events == ["start", ("plan", "fenced"), "evaluate", "stop"]


def test_a_diagnostic_call_in_a_fenced_run_finds_its_inputs_in_place(monkeypatch):
    """--diagnostics in a fenced run: the new inputs (pending for the fence's refill) are copied in and
    the device synchronised before the worker is asked for the call, which may start at once."""
    class Asked(Exception):
        pass

    events = []
    box = object.__new__(sandbox.Sandbox)
    box.device = types.SimpleNamespace(type="cuda", is_gpu=True)
    box._slot = torch.zeros(2)
    box._send = lambda msg, fds=(), ready=True: events.append(("send", msg.get("method")))

    def answer(timeout, what, op):
        raise Asked

    box._answer = answer
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: events.append("sync"))
    with pytest.raises(Asked):
        box.call(timed=True, timeout=5, refill=lambda: events.append("refill"), method="isolated")
    assert events[-3:] == ["refill", "sync", ("send", "isolated")]


def test_the_fence_subtracts_its_median_null_call_and_holds_each_call_to_its_fastest(monkeypatch):
    """calibrate: the cost is the line through each size's median null call (with one kernel), the
    least cost the line through the fastest; the copy's cost is the same calls with a copy, less
    those without. A copy series that fails leaves the fence (and its cost) as it was."""
    from harness.parent import fence as fence_module

    fence = object.__new__(fence_module.Fence)
    fence._warm = lambda: None
    small, large = fence_module.CALIBRATION_BYTES
    spread = [0.0] * 4 + [1e-6, 2e-6, 3e-6, 4e-6, 5e-6]  # (the first four are dropped)
    base = {small: 20e-6, large: 24e-6}
    asked = []

    def series(null_call, nbytes, steps, calls):
        asked.append(tuple(steps))
        if "copy" in steps and fail_copy:
            raise fence_module.FenceError("a null call did not signal within 10 s")
        return [base[nbytes] + t + (3e-6 if "copy" in steps else 0.0) for t in spread]

    monkeypatch.setattr(fence, "null_series", series, raising=False)
    for fail_copy in (False, True):
        fence.calibrate(lambda *a: None)
        assert asked[0] == fence_module.NULL_STEPS == ("kernel",)
        assert fence.cost_s(small) == pytest.approx(23e-6) and fence.cost_s(large) == pytest.approx(27e-6)
        assert fence.cost_s(small, least=True) == pytest.approx(21e-6)
        # the 95% half-width of the median cost: 1.96 * 1.2533 * std / sqrt(n) at each size, carried
        # along the line (at the small size its own; halfway, the two in quadrature, halved)
        half = 1.96 * 1.2533 * statistics.stdev(spread[4:]) / math.sqrt(5)
        assert fence.cost_ci_s(small) == pytest.approx(half)
        assert fence.cost_ci_s((small + large) // 2) == pytest.approx(half * math.sqrt(0.5), rel=1e-3)
        if fail_copy:
            assert fence.copy_cost is None and fence.copy_s(1 << 16) is None
        else:
            assert fence.copy_s(1 << 20) == pytest.approx(3e-6)


def test_a_fenced_call_is_checked_at_the_least_it_took():
    """The sign and the floor are checked on `least_s` (the reading less the fastest null call), so a
    call a little faster than the median hand-over is not rejected, and one below the floor still is."""
    from harness.timing import timing_problem

    assert timing_problem(CallTiming(1e-6, 0.0, 0.0, (), least_s=3e-6), floor_s=2e-6) is None
    assert "below the physical floor" in timing_problem(CallTiming(5e-6, 0.0, 0.0, (), least_s=1e-6), floor_s=2e-6)
    assert "impossible time measured" in timing_problem(CallTiming(5e-6, 0.0, 0.0, (), least_s=-1e-6), floor_s=None)
    assert "reported by the worker" in timing_problem(CallTiming(-1e-6, 0.0, 0.0, ()), floor_s=None)


def test_a_fenced_worker_outside_the_sandbox_is_not_called_verified():
    """Outside the sandbox an earlier file could have rewritten the worker-side harness (its null
    calls, which calibrate the fence, included): the fence's numbers are then unverified."""
    from harness.parent.engine import FENCED, _fenced_audit

    box = types.SimpleNamespace(fence=object(), sandboxed=True, fence_note="fenced")
    assert _fenced_audit(box) == FENCED
    box.sandboxed = False
    assert _fenced_audit(box).startswith("unverified: fenced, but the worker ran outside the sandbox")
    box.fence, box.fence_note = None, "not fenced (a null call costs 300 µs)"
    assert _fenced_audit(box) == "unverified: not fenced (a null call costs 300 µs) (the worker's own events)"


def test_the_workers_side_of_a_fenced_call_stays_on_its_call_stream(monkeypatch):
    """The gate, the output's copy into the slot and DONE all go to the worker's call stream, even
    when the submission leaves another stream current (the copy must be ordered before DONE); DONE
    is written when the call raises too. (CPU: the stream and the flags are stand-ins.)"""
    import contextlib

    from harness.worker import loop, shared_memory

    current = ["default"]

    @contextlib.contextmanager
    def stream(s):
        before, current[0] = current[0], s
        try:
            yield
        finally:
            current[0] = before

    monkeypatch.setattr(torch.cuda, "stream", stream)
    monkeypatch.setattr(shared_memory, "call_stream", lambda: "call stream")
    log = []
    flags = types.SimpleNamespace(wait=lambda s, flag, seq: log.append(("wait", s)),
                                  write=lambda s, flag, seq: log.append(("done", s)))
    timer = types.SimpleNamespace(_perf=lambda: 0.0, _host_times=[])

    slot = torch.zeros(2, 3)
    monkeypatch.setattr(slot, "copy_", lambda out: log.append(("copy", current[0])), raising=False)

    def leaves_a_side_stream_current(data):
        current[0] = "side stream"  # (what torch.cuda.set_stream would do)
        return torch.ones(2, 3)

    reply, pending = loop._fenced_call(leaves_a_side_stream_current, (torch.zeros(1),), slot, timer, flags, 1)
    assert reply["op"] == "enqueued" and pending is not None
    assert log == [("wait", "call stream"), ("copy", "call stream"), ("done", "call stream")]
    assert current[0] == "default"  # the worker's own stream is current again after the call

    log.clear()

    def raises(data):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        loop._fenced_call(raises, (torch.zeros(1),), slot, timer, flags, 2)
    assert log == [("wait", "call stream"), ("done", "call stream")]


def fake_gpu_fence(monkeypatch, steps: list):
    """A Fence whose GPU parts are fakes that append what they are asked to do to `steps`, in order:
    ("go" | "flags", "wait" | "write", flag, value), "event" (a record), "census", ("watch", seq),
    "wait_event". `fence.go.hooks` = {"wait": f, "write": g} are called after the go flags' steps."""
    import contextlib

    from harness.parent import fence as fence_module

    class Flags:
        base = 0

        def __init__(self, name):
            self.name, self.hooks = name, {}

        def _step(self, kind, flag, value):
            steps.append((self.name, kind, flag, value))
            self.hooks.get(kind, lambda: None)()

        def wait(self, stream, flag, value):
            self._step("wait", flag, value)

        def write(self, stream, flag, value):
            self._step("write", flag, value)

    class Event:
        def __init__(self, **_):
            pass

        def record(self, *_):
            steps.append("event")

        def query(self):
            return True

        def elapsed_time(self, other):
            return 0.02

    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "stream", lambda stream: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "current_stream", lambda: None)
    fence = object.__new__(fence_module.Fence)
    fence.flush_buffer = torch.zeros(4096, dtype=torch.uint8)
    fence._words, fence._sink = fence.flush_buffer.view(torch.float32), torch.zeros(())
    fence.cost = fence.least_cost = None
    fence.stream = fence.side = fence.watch_stream = types.SimpleNamespace(
        wait_stream=lambda other: None, wait_event=lambda event: steps.append("wait_event"), query=lambda: True)
    fence.census = types.SimpleNamespace(launch=lambda stream: steps.append("census"), missed=lambda: 0, sms=4)
    fence.watcher = types.SimpleNamespace(
        launch=lambda stream, flag, seq, slot, limit_s, started: steps.append(("watch", seq)),
        changed=lambda snapshot: (True, 0), armed=True)
    fence.flags, fence.go, fence.watch_done = Flags("flags"), Flags("go"), True
    return fence


def test_every_kernel_the_parents_stream_runs_behind_go_is_loaded_before_any_go(monkeypatch):
    """The parent's stream waits on GO until its whole sequence is enqueued; a kernel launched for the
    first time inside that sequence would load its module lazily and wait for an idle device, which
    never comes (the hang of --mode benchmark, whose runs launch no test first). So every aten op the
    sequence runs, but its plain copies (memcpy, no kernel), is one `_load_kernels` runs at the fence's
    start. Logged here on the CPU with fakes for the flags, events and streams."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Log(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.on, self.ops = True, set()

        def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
            if self.on:
                self.ops.add(func.overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    steps = []
    fence = fake_gpu_fence(monkeypatch, steps)
    with Log() as warm:
        fence._load_kernels()
    assert ("watch", 0) in steps  # (the watcher: PTX through the driver, not aten)
    gated = Log()
    fence.go.hooks = {"wait": lambda: setattr(gated, "on", True),     # GO: what follows runs behind it
                      "write": lambda: setattr(gated, "on", False)}   # the host's GO: the sequence is enqueued
    first = (torch.zeros(64, dtype=torch.uint8), torch.ones(64, dtype=torch.uint8))
    slot = torch.ones(128, dtype=torch.uint8)
    rest = (torch.zeros(32), torch.ones(32))
    with gated:
        gated.on = False
        reading = fence.run(1, lambda: rest[0].copy_(rest[1]), first, slot, torch.empty_like(slot), deadline=math.inf,
                            watch_s=1.0)
    assert reading is not None and gated.ops and ("watch", 1) in steps  # (the sequence ran: flush, copies, watcher)
    assert {"zero_", "sum"} <= warm.ops
    assert gated.ops - {"copy_"} <= warm.ops, gated.ops - warm.ops


def test_an_interrupt_during_a_fenced_call_ends_the_worker_first_and_stays_an_interrupt():
    """SIGTERM (a KeyboardInterrupt) while the parent waits on a fenced call: the worker is ended before
    the parent frees its stream (so the release does not wait on a worker still writing DONE), and a
    release that fails all the same does not turn the interrupt into a case failure."""
    from harness.parent.fence import FenceError

    class Interrupted(FakeFence):
        def run(self, *args, **kwargs):
            raise KeyboardInterrupt

        def release(self, seq):
            self.released.append((seq, list(killed)))
            raise FenceError("the parent's timing stream was still held 10 s after the call")

    killed: list = []
    fence = Interrupted(1e-5)
    box, _ = fenced_box([], fence, torch.zeros((2, 3), dtype=torch.bfloat16))
    box.worker.kill = lambda: killed.append(True)
    with pytest.raises(KeyboardInterrupt):
        box.fenced_call(lambda: None, (torch.zeros(1), torch.ones(1)), timeout=5)
    assert fence.released[0] == (1, [True])  # ended before the first release
    assert box.fence is None  # (and no later call is fenced)


def test_a_release_writes_go_too(monkeypatch):
    """A call whose enqueue failed before the host wrote GO leaves the parent's stream waiting on GO:
    the release writes GO as well as DONE, so the stream drains and the fence stays usable."""
    from harness.parent.fence import GO
    from harness.worker.shared_memory import DONE

    steps = []
    fake_gpu_fence(monkeypatch, steps).release(7)
    assert steps == [("go", "write", GO, 7), ("flags", "write", DONE, 7)]


def test_a_census_that_failed_to_launch_is_not_counted(monkeypatch):
    """Each census's blocks wait until the count reaches the rounds so far times the SMs: a launch that
    failed must not count as a round, or every later census would wait for blocks that never come."""
    from harness.parent import census as census_module

    targets = []

    def launch(name, function, *args):
        targets.append(ctypes.cast(args[-2][1], ctypes.POINTER(ctypes.c_uint32)).contents.value)
        if len(targets) == 2:
            raise census_module.SharedMemoryError("cuLaunchKernel failed with error 700")

    monkeypatch.setattr(census_module, "driver_call", launch)
    census = object.__new__(census_module.Census)
    census.sms, census.rounds, census.limit_ns, census.smem, census._function = 4, 0, 1, 0, None
    census.counts = torch.zeros(2, dtype=torch.int32)
    stream = types.SimpleNamespace(cuda_stream=0)
    census.launch(stream)
    with pytest.raises(census_module.SharedMemoryError):
        census.launch(stream)
    census.launch(stream)
    assert targets == [4, 8, 8] and census.rounds == 2
