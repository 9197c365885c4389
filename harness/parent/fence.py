"""The number that ranks, measured in the parent: its own CUDA events around a call the worker makes.

A submission can patch anything in its own process, the worker's timer included, so on NVIDIA GPUs
the parent times every timed call on a stream of its own, fenced to the worker's stream by two flags
in shared GPU memory (harness/worker/shared_memory.py, `StreamFlags`). For call number `seq`:

  worker stream:  wait GATE >= seq, the call, copy the output into the slot, DONE := seq
  parent stream:  wait GO >= seq, refill the inputs but the first, flush L2 (write + read), census,
                  [watched calls: the watcher launched on a stream of its own, wait until it is on an
                  SM], E_mid, refill the first input, GATE := seq, wait DONE >= seq, copy the slot
                  into a private snapshot, E_end; then the parent's host writes GO := seq

The worker enqueues its side first (its launches wait behind GATE: not timed); the parent then
enqueues its own and releases it with GO (its launches are not timed either). The call's time is
E_mid -> E_end less the fence's own cost, measured by null calls before the worker imports the
submission (`calibrate`): GATE to DONE with one trivial kernel between, and the parent's own steps.
The worker records no events inside the interval. The output's copy into the slot stays in the
number (a file that wrote its output there itself would otherwise gain what was subtracted;
`copy_s`). The parent judges the snapshot, whatever the worker says or when it signals DONE. Work
on other streams, on the CPU or through copies lands inside the interval (the output depends on
it); q is written after E_mid, so nothing that needs it can start before the clock. The census
(harness/parent/census.py) proves every SM free of the worker's kernels after the refill and the
flush (nothing loaded on chip before survives into the call); a call where one stayed held is
rejected. In the calls the caller asks to watch (`run(watch_s=)`: a few drawn in secret, judged and
never timed, harness/parent/case.py), the watcher (harness/parent/watcher.py) samples the slot from
an SM the moment DONE is written: a call whose output changed after its DONE (a last step hidden in
the stream's wake-up, which the null calls subtract) is rejected.

The two processes' streams meet on the GPU only under MPS, which the run starts (harness/parent/mps.py):
across ordinary contexts every flag handed over waits for a time slice (~0.3 ms on the H200,
BENCHMARKS.md).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from typing import Any, Callable, Optional, Sequence

import torch

from harness.parent.census import Census
from harness.parent.watcher import DoneWatcher
from harness.device import flush_bytes
from harness.worker.shared_memory import DONE, GATE, Buffer, SharedMemoryError, StreamFlags

# Null calls per size when calibrating (the first 4 of each not counted). Their spread (~1 µs on the
# H100) makes the median's own error the largest part of a small case's run-to-run difference: 20
# counted calls leave ~0.28 µs (~2% of a 15 µs call), 96 leave ~0.13 µs.
NULL_CALLS = 100
COPY_CALLS = 24          # the same for the copy's diagnostic series (`slot copy µs`, not subtracted)
NULL_STEPS = ("kernel",)  # what the worker does between GATE and DONE in them (harness/worker/fence_side.py)
WARM_S = 0.03            # how long the GPU is kept busy right before the null calls (its clocks up, as in a run)
CALIBRATION_BYTES = (1 << 16, 1 << 23)  # the two sizes (first input + output bytes) the fence's cost is fitted at
# A fence whose null call costs more is not sharing one hardware context with the worker (no MPS:
# ~290 µs of time slices on the H200, against 11-33 µs under MPS, BENCHMARKS.md): it is refused.
MAX_COST_S = 60e-6
CENSUS_LOOK_S = 0.002    # how long after the census starts the parent looks whether it is stuck
# The longest a census may take from its launch to every block counted in. Its blocks can be placed
# only on empty SMs, so a kernel that holds SMs delays them instead of making them miss: a few µs on
# a free H200 (BENCHMARKS.md); longer means some SM was held when the census came.
CENSUS_MAX_S = 20e-6
RELEASE_SECONDS = 10.0   # how long the parent's stream may take to drain once the worker is gone
GO = 0                   # the flag (in a buffer of the parent's own) its stream waits on until a call is enqueued
STARTED = 4              # in the same buffer: the call's watcher is on an SM (harness/parent/watcher.py)


@dataclasses.dataclass(frozen=True)
class Reading:
    """What the parent's clock saw of one call."""

    interval_s: float   # E_mid -> E_end
    call_s: float       # the interval less the fence's own cost: the number that ranks
    held: int = 0       # census blocks that found their SM held by another kernel (the call is rejected)
    census_s: float = 0.0  # from the census's launch to every block counted in (over CENSUS_MAX_S: held)
    least_s: float = math.nan  # the interval less the fastest null call: what the call took at the least


class FenceError(RuntimeError):
    pass


class Fence:
    """The parent's clock for one worker; `flags` is the buffer the worker maps as its side."""

    # Where the census runs: "mid", just before E_mid (its own time is outside the clock; what the
    # worker starts after it and before GATE gains at most the first input's copy and the hand-over),
    # or "gate", after the first input's copy (inside the clock: its cost is subtracted with the rest).
    census_at = "mid"
    # Whether the watcher (harness/parent/watcher.py) is loaded for the calls the caller asks to watch
    # (`run(watch_s=...)`), and whether it watches every call instead, null calls included, all timed
    # (no call can then be told apart; its warp's cost is in every number: docs/threat-model.md).
    # Both off until measured on a GPU (lab/gpu_issue37s.sh).
    watch_done = False
    watch_all = False

    def __init__(self, l2_bytes: int):
        self.buffer = Buffer(4096, "cuda")
        self.flags = StreamFlags(self.buffer)
        self._go_buffer = Buffer(4096, "cuda")  # the parent's own (never shared): GO releases its stream
        self._go_buffer.close_fd()
        self.go = StreamFlags(self._go_buffer)
        self._go_buffer.bytes_tensor().zero_()
        try:
            self.census = Census()
            self.watcher = DoneWatcher() if self.watch_done or self.watch_all else None  # (off: not loaded)
        except (SharedMemoryError, OSError, AttributeError) as exc:
            raise FenceError(f"the fence's kernels did not load ({exc})") from None
        self.buffer.bytes_tensor().zero_()
        self.stream = torch.cuda.Stream()
        self.side = torch.cuda.Stream()  # releases the parent's stream when a worker never signals
        self.watch_stream = torch.cuda.Stream()  # the DONE watcher's (`_watch`)
        self._watching = False  # whether the last call's watcher was launched
        self.flush_buffer = torch.zeros(flush_bytes(l2_bytes), dtype=torch.uint8, device="cuda")
        self._words = self.flush_buffer.view(torch.float32)
        self._sink = torch.zeros((), dtype=torch.float32, device="cuda")
        self.seq = 0
        self.cost: Optional[tuple[float, float]] = None  # (seconds, seconds per byte) of the fence itself
        self.least_cost: Optional[tuple[float, float]] = None  # the same through each size's fastest null call
        self.copy_cost: Optional[tuple[float, float]] = None  # the same of the output's copy into the slot
        self.null_times: dict[int, list[float]] = {}  # the counted null calls' intervals per size (calibrate)
        self.census_times: list[float] = []
        self._load_kernels()
        torch.cuda.synchronize()

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def cost_s(self, nbytes: int, least: bool = False) -> float:
        """The fence's cost subtracted from a reading of `nbytes` (first input + output): its median
        null call, or with `least` its fastest (what no call's own time can be below)."""
        base, per_byte = (self.least_cost if least else self.cost) or (0.0, 0.0)
        return base + per_byte * nbytes

    def cost_ci_s(self, nbytes: int) -> float:
        """The half-width of the 95% interval of `cost_s(nbytes)`: its null calls' median is an
        estimate, and its error is shared by every reading it is subtracted from, so a case's ranked
        median carries it beside its own calls' spread (0 before calibrating)."""
        times = self.null_times
        if any(len(times.get(n, ())) < 2 for n in CALIBRATION_BYTES):
            return 0.0
        # the median's standard error (1.2533 * std / sqrt(n)) at each size, carried along the line
        se = [1.2533 * statistics.stdev(times[n]) / math.sqrt(len(times[n])) for n in CALIBRATION_BYTES]
        b0, b1 = CALIBRATION_BYTES
        w = (nbytes - b0) / (b1 - b0)
        return 1.96 * math.sqrt(((1 - w) * se[0]) ** 2 + (w * se[1]) ** 2)

    def copy_s(self, nbytes: int) -> Optional[float]:
        """What the worker's copy of an `nbytes` output into the slot costs inside a reading (it is
        not subtracted: a submission could write its output there itself), or None before calibrating."""
        if self.copy_cost is None:
            return None
        base, per_byte = self.copy_cost
        return max(0.0, base + per_byte * nbytes)

    def calibrate(self, null_call: Callable[..., None]) -> None:
        """The fence's own cost, from null calls at two sizes of the first input + output (the parent
        copies both), fitted as a line through each size's median call. In a null call the worker's
        side waits on GATE, launches one kernel (a one-element add) and signals DONE: the hand-over
        and the dispatch every call with a kernel has (a stream that leaves a wait for a kernel and a
        kernel's end for the next flag cost ~4.6 µs more than flag to flag on the H100,
        BENCHMARKS.md), nothing a submission's work could leave out. The output's copy into the slot
        stays in the number: a submission could write its output there itself and skip it.
        `null_call(seq, slot bytes, steps)` asks the worker for one; it runs before the submission is
        imported, so nothing of the submission's is in it. The GPU is kept busy for WARM_S first: null
        calls on a GPU idle since the worker started cost up to several times what they cost in a run
        (BENCHMARKS.md)."""
        self._warm()
        self.null_times, self.census_times = {}, []
        for nbytes in CALIBRATION_BYTES:
            self.null_times[nbytes] = self.null_series(null_call, nbytes, NULL_STEPS, NULL_CALLS)[4:]
        typical = [statistics.median(self.null_times[n]) for n in CALIBRATION_BYTES]
        if max(typical) > MAX_COST_S:
            raise FenceError(f"a null call costs {max(typical) * 1e6:.0f} µs: the processes share no MPS server")
        self.cost = _line(CALIBRATION_BYTES, typical)
        self.least_cost = _line(CALIBRATION_BYTES, [min(self.null_times[n]) for n in CALIBRATION_BYTES])
        self.copy_cost = self._copy_cost(null_call, typical)

    def _copy_cost(self, null_call: Callable[..., None], typical: Sequence[float]) -> Optional[tuple[float, float]]:
        """The same null calls with a copy of the slot's size, less those without: what the output's
        copy costs, a line in the slot's bytes; None where they fail (a diagnostic: the fence stays)."""
        self._warm()
        try:
            copies = [max(0.0, statistics.median(self.null_series(null_call, n, NULL_STEPS + ("copy",), COPY_CALLS)[4:])
                          - base) for n, base in zip(CALIBRATION_BYTES, typical)]
        except FenceError:
            return None
        return _line([n - n // 2 for n in CALIBRATION_BYTES], copies)

    def null_series(self, null_call: Callable[..., None], nbytes: int, steps: Sequence[str], calls: int) -> list[float]:
        """The intervals of `calls` null calls with `nbytes` of first input + output, the worker doing
        `steps` between GATE and DONE (harness/worker/fence_side.py, NULL_STEPS). FenceError when one does
        not signal or finds an SM held."""
        first = torch.zeros(nbytes // 2, dtype=torch.uint8, device="cuda")
        slot = torch.zeros(nbytes - nbytes // 2, dtype=torch.uint8, device="cuda")
        fresh, snapshot = torch.ones_like(first), torch.empty_like(slot)
        times = []
        for _ in range(calls):
            seq = self.next_seq()
            null_call(seq, slot.numel(), *([tuple(steps)] if steps else []))
            reading = self.run(seq, lambda: None, (first, fresh), slot, snapshot, deadline=time.monotonic() + 10)
            if reading is None or self.held(reading):
                why = "a null call did not signal within 10 s" if reading is None else f"during a null call {self.held(reading)}"
                self.release(seq)  # (the parent's stream must not stay behind the worker's DONE)
                raise FenceError(why)
            times.append(reading.interval_s)
            self.census_times.append(reading.census_s)
        return times

    def _load_kernels(self) -> None:
        """Every kernel the parent's stream runs behind GO (the census's is loaded with its module),
        launched once. Under lazy module loading (CUDA's default) a kernel's first launch loads its
        module and waits for the device to go idle, which it never does while the parent's own stream
        waits on GO, written only after that launch returns: the parent would hang in its first null
        call wherever nothing earlier in the process had launched them (--mode benchmark, which runs
        no tests first). The watcher's DONE is already 0, so it returns at once."""
        self._flush()
        if self.watcher is not None:
            self.watcher.launch(torch.cuda.current_stream(), self.flags.base + DONE, 0, self._sink, 1.0,
                                self.go.base + STARTED)

    def _flush(self) -> None:
        """L2 flushed on the current stream: written (it holds none of the inputs), then read (its
        lines are clean: no write-backs inside the call)."""
        self.flush_buffer.zero_()
        torch.sum(self._words, 0, out=self._sink)

    def _warm(self) -> None:
        """Flush after flush on the parent's stream for WARM_S (timed by the flushes themselves)."""
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(self.stream):
            start.record()
            self.flush_buffer.zero_()
            end.record()
        end.synchronize()
        rounds = max(1, int(WARM_S / max(start.elapsed_time(end) / 1e3, 1e-6)))
        with torch.cuda.stream(self.stream):
            for _ in range(rounds):
                self.flush_buffer.zero_()
        self.stream.synchronize()

    def run(self, seq: int, refill_rest: Callable[[], None], first: tuple[torch.Tensor, torch.Tensor],
            slot: torch.Tensor, snapshot: torch.Tensor, deadline: float,
            watch_s: Optional[float] = None) -> Optional[Reading]:
        """The parent's side of call `seq`, once the worker enqueued its own: `refill_rest()` copies
        every input but the first, `first` is (shared first input, its new value); `watch_s`: where
        the watcher is loaded, it samples the output at DONE, waiting at most that long for it (the
        call is then a check, not a timing, for the caller to keep out of the samples; its verdict:
        `watch_verdict`). Returns the reading; one with `held` set and no times when the census found
        an SM held (the parent's stream may still wait on it); or None when the worker did not signal
        DONE by `deadline`. In both of the last cases the caller ends the worker and calls `release`."""
        self.stream.wait_stream(torch.cuda.current_stream())  # the new inputs were made on the default stream
        marks = census, counted, mid, end = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
        self._watching = False
        if self.watch_all:
            watch_s = max(0.0, deadline - time.monotonic())
        self._enqueue(seq, refill_rest, first, slot, snapshot, deadline, marks, watch_s)
        self.go.write(self.side, GO, seq)
        look = None  # once the census has started: when to look whether it is stuck (its SMs held)
        while not end.query():
            now = time.monotonic()
            if now > deadline:
                return None
            if look is None and census.query():
                look = now + CENSUS_LOOK_S
            elif look is not None and now > look and not counted.query():
                held = self._held_now()  # blocks that gave up waiting; none placed at all: every SM held
                return Reading(math.nan, math.nan, held or self.census.sms, CENSUS_LOOK_S)
            time.sleep(0)
        interval = mid.elapsed_time(end) / 1e3
        census_s = census.elapsed_time(counted) / 1e3
        nbytes = first[0].numel() * first[0].element_size() + slot.numel() * slot.element_size()
        least = interval - self.cost_s(nbytes, least=True)
        typical = interval - self.cost_s(nbytes)
        # (a call faster than the median hand-over by luck is counted at its least, never at zero or below)
        return Reading(interval, typical if typical > 0 else least, self.census.missed(), census_s, least)

    def watch_verdict(self, snapshot: torch.Tensor, deadline: float) -> tuple[bool, int]:
        """For the last call, once `run` returned its reading: (whether the watcher saw DONE, how many
        of its samples changed in `snapshot`); (True, 0) where it did not run. It ends once it sees
        DONE, which the parent's stream has passed, or at its bound; one still running past the
        deadline (DONE written and taken back) counts as unseen. Asked for after the worker's own
        reply (harness/parent/sandbox.py), so the worker's next message does not come later after a
        watched call."""
        if not self._watching:
            return True, 0
        while not self.watch_stream.query():
            if time.monotonic() > deadline + 2.0:
                return False, 0
            time.sleep(0)
        return self.watcher.changed(snapshot)

    def _enqueue(self, seq: int, refill_rest: Callable[[], None], first: tuple[torch.Tensor, torch.Tensor],
                 slot: torch.Tensor, snapshot: torch.Tensor, deadline: float, marks: Sequence[Any],
                 watch_s: Optional[float] = None) -> None:
        """The parent's side of call `seq` (the module's docstring), enqueued behind GO; `marks` are the
        events (census, counted, mid, end)."""
        census, counted, mid, end = marks
        flags, stream = self.flags, self.stream
        with torch.cuda.stream(stream):
            self.go.wait(stream, GO, seq)  # the whole sequence runs once enqueued: no gap of the host's in it
            refill_rest()
            self._flush()
            if self.census_at == "mid":
                self._census_then_watch(census, counted, seq, slot, deadline, watch_s)  # (before the clock)
            mid.record()
            first[0].copy_(first[1])
            if self.census_at == "gate":
                self._census_then_watch(census, counted, seq, slot, deadline, watch_s)
            flags.write(stream, GATE, seq)
            flags.wait(stream, DONE, seq)
            snapshot.copy_(slot)
            end.record()

    def _census_then_watch(self, census: Any, counted: Any, seq: int, slot: torch.Tensor, deadline: float,
                           watch_s: Optional[float]) -> None:
        """The census between its two events on the parent's stream, then in a watched call the watcher
        (after the census, which needs every SM whole: a watcher already on one would keep a census
        block off it)."""
        census.record()
        self.census.launch(self.stream)
        counted.record()
        if watch_s is not None:
            self._watch(seq, slot, min(deadline, time.monotonic() + watch_s))

    def _watch(self, seq: int, slot: torch.Tensor, until: float) -> None:
        """The watcher of call `seq` (where loaded), waiting for DONE until `until` (host monotonic)
        and a second more: launched on a stream of its own once the parent's stream is past the census,
        which then waits until it is on an SM (placed before any kernel of the call). Its bound lets
        a call that cannot start beside it (a launch that needs every SM) go on, and fail as unseen.
        The streams wait on flags each other writes: each needs a hardware queue (context.py)."""
        if self.watcher is None:
            return
        armed = torch.cuda.Event()
        armed.record(self.stream)
        self.watch_stream.wait_event(armed)
        self.watcher.launch(self.watch_stream, self.flags.base + DONE, seq, slot,
                            max(0.0, until - time.monotonic()) + 1.0, self.go.base + STARTED)
        self._watching = self.watcher.armed
        if self._watching:  # (nothing launched for a slot under 4 bytes: nothing to wait for)
            self.go.wait(self.stream, STARTED, seq)

    @staticmethod
    def held(reading: Reading) -> str:
        """Why the census says a kernel was on the GPU when `reading`'s call began, or ""."""
        if reading.held:
            return f"{reading.held} of the census's blocks found their SM held"
        if reading.census_s > CENSUS_MAX_S:
            return (f"the census waited {reading.census_s * 1e6:.0f} µs for SMs held by another kernel "
                    f"(on a free GPU: under {CENSUS_MAX_S * 1e6:.0f} µs)")
        return ""

    def _held_now(self) -> int:
        """The census's missed blocks so far, read on the side stream (the parent's may be waiting)."""
        with torch.cuda.stream(self.side):
            held = self.census.missed()
        return held

    def release(self, seq: int) -> None:
        """Write GO and DONE from the parent and wait, at most RELEASE_SECONDS, for the parent's stream
        to pass them (a worker that failed before signalling, or a call whose enqueue failed before GO;
        call it once a worker that may still write DONE, or hold the GPU, has been ended). FenceError
        when the stream stays held."""
        self.go.write(self.side, GO, seq)
        self.flags.write(self.side, DONE, seq)
        deadline = time.monotonic() + RELEASE_SECONDS
        while not (self.side.query() and self.stream.query()):
            if time.monotonic() > deadline:
                raise FenceError(f"the parent's timing stream was still held {RELEASE_SECONDS:.0f} s after the call")
            time.sleep(0.001)


def first_input(shared: Any, fresh: Any, tensors: Callable[[Any], Sequence]) -> tuple[list, tuple]:
    """(the pairs (shared, new) of every input but the first, the first's pair): the first input is
    written after the clock starts."""
    pairs = [(dst, src) for (_, dst), (_, src) in zip(tensors(shared), tensors(fresh))]
    return pairs[1:], pairs[0]


def _line(sizes: Sequence[int], times: Sequence[float]) -> tuple[float, float]:
    """(intercept, slope) of the line through two (size, time) points, its slope at least 0."""
    (b0, b1), (t0, t1) = sizes, times
    per_byte = max(0.0, (t1 - t0) / (b1 - b0))
    return t0 - per_byte * b0, per_byte
