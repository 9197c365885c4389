"""The DONE watcher's judgement on the CPU (harness/parent/watcher.py): what its record says against the
parent's snapshot, and what a call whose output changed after DONE gets. The kernel itself runs on
GPUs only (lab/watcher_check.py checks it there against `offsets`)."""
import os
import types

import torch
from test_fence import FakeFence, fenced_box, forged, no_cuda_sync  # noqa: F401 (autouse: no CUDA here)

import pytest

from harness.parent import sandbox, watcher


def record(seed: int, words: torch.Tensor, seen: int = 1) -> torch.Tensor:
    """What the kernel leaves in `out` for a slot holding `words` at DONE (its offsets: `offsets`)."""
    at = torch.tensor(watcher.offsets(seed, words.numel()))
    head = torch.tensor([seen, 0, 0, 0], dtype=torch.int32)
    return torch.cat([head, at.int(), words[at]])


def test_offsets_are_in_the_slot_and_move_with_the_seed():
    for nwords in (1, 7, 4096, 1 << 20):
        for seed in (0, 1, 0xFFFFFFFF):
            assert all(0 <= o < nwords for o in watcher.offsets(seed, nwords))
    a, b = watcher.offsets(1, 1 << 20), watcher.offsets(2, 1 << 20)
    assert len(set(a)) > watcher.SAMPLES * 0.95 and len(set(a) & set(b)) < 5


def test_a_slot_unchanged_since_done_passes_and_one_changed_word_is_counted():
    slot = torch.arange(2048, dtype=torch.int32).view(torch.bfloat16)  # 4096 bf16: 2048 words
    out = record(7, slot.view(torch.int32))
    assert watcher.compare(out, slot.clone()) == (True, 0)
    later = slot.clone()
    later.view(torch.int32)[watcher.offsets(7, 2048)[5]] = -1  # one sampled word written after DONE
    assert watcher.compare(out, later) == (True, 1)
    later.view(torch.int32).fill_(3)  # the whole output written after DONE
    assert watcher.compare(out, later) == (True, watcher.SAMPLES)


def test_a_watcher_that_never_saw_done_judges_nothing():
    slot = torch.zeros(512, dtype=torch.bfloat16)
    out = record(3, slot.view(torch.int32), seen=2)
    assert watcher.compare(out, torch.ones_like(slot)) == (False, 0)


def test_an_output_changed_after_done_fails_the_call_in_one_line_and_the_run_goes_on():
    """A worker that signals DONE before its last step ends (its output's copy, a kernel on another
    stream) passes the snapshot, which the parent's stream takes after its wake-up; the watcher's
    samples at DONE differ from it, and the call fails with one line. The worker is not ended: the call
    is over and its reply was read, so the next case runs."""

    class EarlyFence(FakeFence):
        def run(self, seq, refill_rest, first, slot, snapshot, deadline, watch_s=None):
            self.slot_at_gate = slot.clone()
            return super().run(seq, refill_rest, first, slot, snapshot, deadline, watch_s)

        def watch_verdict(self, snapshot, deadline):
            assert sent == ["call", "collect"]  # (asked after the worker's reply: no later message for a watched call)
            return True, 17

    slot = torch.full((2, 8), 7.0, dtype=torch.bfloat16)
    fence = EarlyFence(40e-6)
    box, sent = fenced_box(forged(slot.shape), fence, slot)
    box.worker.kill = lambda: pytest.fail("the worker was ended")
    with pytest.raises(sandbox.WorkerFailure) as failure:
        box.fenced_call(lambda: None, (torch.zeros(1), torch.ones(1)), timeout=5)
    assert failure.value.kind == "early end" and not failure.value.fatal
    assert f"17 of {watcher.SAMPLES} words of the output sampled when it did changed afterwards" in str(failure.value)
    assert "\n" not in str(failure.value) and sent == ["call", "collect"]
    # the slot held 0xFF bytes when the call began: no stale answer, and any write after DONE changes it
    assert bool((fence.slot_at_gate.view(torch.uint8) == 0xFF).all())


@pytest.mark.parametrize("value, kept", [("1", False), ("4", False), (" x", False), ("8", True), ("32", True),
                                         (None, True)])
def test_a_fenced_run_drops_a_setting_that_would_put_its_streams_in_one_queue(monkeypatch, value, kept):
    """CUDA_DEVICE_MAX_CONNECTIONS=1 (common in training setups) puts every stream of a process in one
    hardware queue: the fence's wait on GO would hold up the write of GO on its other stream. A fenced
    run drops settings under CUDA's default of 8 before its first CUDA context."""
    from harness.parent import context, mps

    if value is None:
        monkeypatch.delenv(context.QUEUES, raising=False)
    else:
        monkeypatch.setenv(context.QUEUES, value)
    monkeypatch.setattr(mps, "start", lambda: None)
    config = types.SimpleNamespace(mode="leaderboard", device="cuda", no_audit=False)
    assert context.fence_plan(config) == "fenced"
    assert os.environ.get(context.QUEUES) == (value if kept else None)


def sequence(monkeypatch, census_at="mid", armed=True, seen=True, on=True, watch=1.0, every=False):
    """The steps of one fenced call (seq 5) with the watcher loaded (`on`) and asked for (`watch`), the
    fakes of test_fence, and its reading."""
    from test_fence import fake_gpu_fence

    steps = []
    fence = fake_gpu_fence(monkeypatch, steps)
    fence.census_at, fence.watcher.armed, fence.watch_all = census_at, armed, every
    fence.watcher.changed = lambda snapshot: (seen, 0)
    if not on:
        fence.watch_done, fence.watcher = False, None  # (as a Fence made with it off: not loaded)
        fence._load_kernels()
    first = (torch.zeros(8, dtype=torch.uint8), torch.ones(8, dtype=torch.uint8))
    slot = torch.zeros(8, dtype=torch.uint8)
    snapshot = torch.empty_like(slot)
    reading = fence.run(5, lambda: None, first, slot, snapshot, deadline=float("inf"), watch_s=watch)
    return steps, fence.watch_verdict(snapshot, float("inf")) if reading else None


def test_the_watcher_is_on_an_sm_after_the_census_and_before_the_clock_starts(monkeypatch):
    """Launched once the census proved every SM free, on a stream of its own behind an event of the
    parent's stream; the parent's stream waits until it is on an SM (STARTED) and only then starts the
    clock (the `mid` event), so it is placed before any kernel of the call; nothing waits for its end."""
    from harness.parent.fence import GO, STARTED
    from harness.worker.shared_memory import DONE, GATE

    steps, verdict = sequence(monkeypatch)
    assert steps == [("go", "wait", GO, 5), "event", "census", "event",  # census, counted
                     "event", "wait_event", ("watch", 5), ("go", "wait", STARTED, 5),  # armed
                     "event", ("flags", "write", GATE, 5), ("flags", "wait", DONE, 5), "event",  # mid ... end
                     ("go", "write", GO, 5)]
    assert verdict == (True, 0)


def test_with_the_census_at_the_gate_the_watcher_follows_it(monkeypatch):
    """The census needs every SM whole: a watcher already on one would keep a census block off it."""
    from harness.parent.fence import STARTED

    steps, _ = sequence(monkeypatch, census_at="gate")
    census, watch = steps.index("census"), steps.index(("watch", 5))
    assert census < watch < steps.index(("go", "wait", STARTED, 5))


def test_a_slot_too_small_to_watch_is_not_waited_for(monkeypatch):
    """No watcher is launched for a slot under 4 bytes: the parent's stream must not wait for one."""
    from harness.parent.fence import STARTED

    steps, verdict = sequence(monkeypatch, armed=False, seen=False)
    assert ("go", "wait", STARTED, 5) not in steps and verdict == (True, 0)


def test_a_done_the_watcher_never_saw_fails_the_call(monkeypatch):
    """The parent's stream passed DONE, but the watcher never saw it: DONE was written and taken back."""
    _, verdict = sequence(monkeypatch, seen=False)
    assert verdict == (False, 0)

    class UnseenFence(FakeFence):
        def watch_verdict(self, snapshot, deadline):
            return False, 0

    slot = torch.zeros((2, 8), dtype=torch.bfloat16)
    box, _ = fenced_box(forged(slot.shape), UnseenFence(4e-5), slot)
    with pytest.raises(sandbox.WorkerFailure) as failure:
        box.fenced_call(lambda: None, (torch.zeros(1), torch.ones(1)), timeout=5)
    assert failure.value.kind == "early end" and "did not see the call's DONE" in str(failure.value)
    assert "a launch that needs every SM" in str(failure.value) and not failure.value.fatal


def test_watching_every_call_watches_a_call_no_one_asked_to_watch_and_no_call_is_set_apart(monkeypatch):
    """`Fence.watch_all`: the watcher in every call the fence runs (null calls too: the same `run`), so
    no call can be told apart from another; TimedCalls then sets no watched calls apart."""
    from harness.parent import case
    from harness.parent.fence import STARTED

    steps, verdict = sequence(monkeypatch, watch=None, every=True)
    assert ("watch", 5) in steps and ("go", "wait", STARTED, 5) in steps and verdict == (True, 0)
    inputs = _Inputs()
    inputs.box.fence.watch_all = True
    calls = case.TimedCalls(inputs, lambda: 1, float("inf"), lambda *a, **k: None, None)
    assert calls.take(lambda: len(inputs.calls) < 30) is None and not any(inputs.calls) and not calls.may_watch()


@pytest.mark.parametrize("on, watch", [(False, 1.0), (True, None)])
def test_a_call_not_watched_has_nothing_of_the_watcher(monkeypatch, on, watch):
    """Off, or on in a call not asked to be watched (every timed one: harness/parent/case.py), the
    fence's sequence is the census, the clock, GATE, DONE; no stale record of an earlier watched call
    is judged."""
    from harness.parent.fence import GO
    from harness.worker.shared_memory import DONE, GATE

    steps, verdict = sequence(monkeypatch, on=on, watch=watch, seen=False)
    assert steps == [("go", "wait", GO, 5), "event", "census", "event", "event",
                     ("flags", "write", GATE, 5), ("flags", "wait", DONE, 5), "event", ("go", "write", GO, 5)]
    assert verdict == (True, 0)


class _Inputs:
    """A case's inputs as TimedCalls sees them: every call passes in `call_s`; `calls` records each
    call's watcher bound (None: not watched)."""

    def __init__(self, fails_watched=False, call_s=1e-5):
        self.box = types.SimpleNamespace(fence=types.SimpleNamespace(watcher=object()))
        self.case = "c"
        self.ctx = types.SimpleNamespace(problem=types.SimpleNamespace(spec=types.SimpleNamespace(
            timing=types.SimpleNamespace(max_runs=100))))
        self.calls, self.fails_watched, self.call_s = [], fails_watched, call_s

    def refill(self, seed):
        pass

    def call(self, timed, deadline, watch_s=None):
        from harness.task.verdict import Verdict
        from harness.timing import CallTiming

        self.calls.append(watch_s)
        ok = not (watch_s is not None and self.fails_watched)
        return (Verdict(ok, "matches" if ok else "early end: 128 of 128 words changed"),
                CallTiming(self.call_s, 1e-6, 0.0, ()))


def timed_calls(inputs):
    from harness.parent import case

    return case.TimedCalls(inputs, lambda: 1, float("inf"), lambda *a, **k: None, None)


def test_watched_calls_are_drawn_in_secret_judged_and_never_timed(monkeypatch):
    """About one call in WATCH_ONE_IN is watched, by the secrets module's draw: judged like the others,
    its time kept out of the samples (and kept apart); a watched call
    that fails names itself. The watcher waits for DONE a bounded time: WATCH_FIRST_S before any call
    was timed, then WATCH_BOUND times the slowest call so far, at least WATCH_MIN_S."""
    from harness.parent import case

    draws = iter([0, 3, 0, 5, 0, 2] * 10)
    monkeypatch.setattr(case.secrets, "randbelow", lambda n: next(draws) if n == case.WATCH_ONE_IN else 0)
    inputs = _Inputs(call_s=2e-3)
    calls = timed_calls(inputs)
    assert calls.take(lambda: len(inputs.calls) < 6) is None
    assert inputs.calls == [case.WATCH_FIRST_S, None, case.WATCH_BOUND * 2e-3, None, case.WATCH_BOUND * 2e-3, None]
    assert calls.device == [2e-3] * 3 and calls.watched == [2e-3] * 3
    small = _Inputs(call_s=1e-5)
    calls = timed_calls(small)
    calls.device = [1e-5]
    assert calls.watch() is None and small.calls == [case.WATCH_MIN_S]
    failing = _Inputs(fails_watched=True)
    assert timed_calls(failing).take(lambda: True) == "watched call 1: early end: 128 of 128 words changed"


def test_a_case_owes_one_watched_call_and_only_where_a_watcher_runs():
    """A case none of whose calls was drawn gets one watched call at its end, where time is left
    (harness/parent/engine.py); none without a watcher."""
    inputs = _Inputs()
    calls = timed_calls(inputs)
    assert calls.may_watch()
    calls.watched.append(1e-5)
    assert not calls.may_watch()
    calls = timed_calls(inputs)
    calls.deadline = 0.0
    assert not calls.may_watch()
    inputs.box.fence = None
    calls = timed_calls(inputs)
    assert calls.take(lambda: len(inputs.calls) < 30) is None and not any(inputs.calls) and len(calls.device) == 30
    assert not calls.may_watch()
