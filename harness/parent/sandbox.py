"""The trusted parent's handle on one untrusted worker process (started by harness/parent/launch.py).

The parent owes the worker nothing: every receive and every send has a deadline, every receive a
size limit, replies are plain JSON checked field by field, and outputs land in a slot the parent
allocated with exactly the expected size (harness/worker/shared_memory.py), so nothing the worker says
can make the parent allocate, unpickle or wait beyond what it chose.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import torch

from harness.worker import shared_memory
from harness.worker.channel import ChannelClosed, ChannelError, ChannelTimeout, printable, printable_line
from harness.device import DeviceInfo
from harness.parent.launch import WorkerProcess, start_worker
from harness.parent.watcher import watch_problem
from harness.timing import CallTiming

# A request is a small frame that fits the socket's buffer whole, so a worker waiting for it takes it at
# once; one that stops reading its channel fills the buffer after a few hundred requests.
SEND_SECONDS = 10.0


class WorkerFailure(Exception):
    """The submission failed in a way that ends a call: `kind` is a short category, the message
    one line a competitor understands."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.fatal = kind in ("crashed", "timeout", "startup", "protocol", "held the GPU")


class Sandbox:
    """One worker process for one submission. Use as a context manager."""

    fence = None  # harness.parent.fence.Fence, once the worker took it and its cost is measured (fenced GPU runs)
    fence_note = "not fenced"

    def __init__(self, submission: Path, device: DeviceInfo, log_path: Path, startup_timeout: float,
                 started: Optional[WorkerProcess] = None, sandbox: str = "auto", private: Sequence[Path] = (),
                 wrapper: Sequence[str] = (), report: Optional[Path] = None, scratch: Optional[Path] = None,
                 fence: bool = False, shared: Sequence[Path] = ()):
        """Start the worker, or adopt one `launch.start_worker` started earlier (`started`). `fence`:
        time calls with the parent's fence (harness/parent/fence.py) where the worker offers it. `shared`:
        what every worker may read besides its submission (--share)."""
        self.submission, self.log_path, self.device = submission, log_path, device
        self.worker = started or start_worker(submission, device.type, log_path, device.l2_bytes, sandbox,
                                              private, wrapper, report, scratch, fence=fence, shared=shared)
        self._want_fence = fence
        self._enqueue_times: list[float] = []
        self._startup_timeout, self._ready = startup_timeout, False
        self._failure: Optional[WorkerFailure] = None
        self._slot: Optional[torch.Tensor] = None
        self._replied = False  # a reply came since the last request: the worker has read every request

    @property
    def sandboxed(self) -> bool:
        return self.worker.sandboxed

    def wait_ready(self) -> None:
        """Wait for the worker to import the submission (starting it does not wait, so the parent
        can work meanwhile). Raises WorkerFailure when the import fails."""
        if self._ready:
            return
        if self._failure is not None:
            raise self._failure
        try:
            deadline = time.monotonic() + self._startup_timeout
            reply = self._receive(self._startup_timeout, "starting the worker and importing the submission")
            if reply.get("op") == "fence-ready":  # before its import: the fence, then the import
                self._start_fence()
                reply = self._receive(max(1.0, deadline - time.monotonic()), "importing the submission")
            if reply.get("op") == "fatal" and _kind(reply) in FATAL_KINDS:
                self.close()
                raise WorkerFailure(reply["kind"], _text(reply.get("message")))
            if reply.get("op") != "ready":
                self._protocol_error(reply)
        except WorkerFailure as exc:
            self._failure = exc  # the same failure again for a later wait_ready
            raise
        self._ready = True

    def _start_fence(self) -> None:
        """Hand the worker the fence's flags and measure the fence's cost with null calls (nothing of
        the submission's exists yet), then let it import; the fence_note says what came of it."""
        from harness.parent.fence import Fence, FenceError

        fence = None
        if self._want_fence:
            try:
                fence = Fence(self.device.l2_bytes)
                self._send({"op": "fence", "nbytes": fence.buffer.nbytes}, fds=[fence.buffer.fd], ready=False)
                fence.buffer.close_fd()

                def null_call(seq: int, nbytes: int, steps: tuple[str, ...] = ()) -> None:
                    self._send({"op": "null", "seq": seq, "nbytes": nbytes, "steps": list(steps)}, ready=False)
                    if self._receive(10.0, "a null call of the fence").get("op") != "enqueued":
                        raise FenceError("the worker did not answer a null call")

                fence.calibrate(null_call)
            except (FenceError, RuntimeError, OSError) as exc:  # (a WorkerFailure is none of these: it ends the start)
                self.fence_note = f"not fenced ({str(exc)[:120]})"
                fence = None
        self.worker.close_mps_view()  # its context is made: the daemon's control socket goes before the import
        self._send({"op": "import"}, ready=False)
        if fence is not None:
            self.fence, self.fence_note = fence, "fenced"

    @property
    def settled(self) -> bool:
        """Whether the start is over (ready, or failed)."""
        return self._ready or self._failure is not None

    def settle(self) -> None:
        """Wait for the start to end, ready or not; a failure is raised by the next wait_ready."""
        try:
            self.wait_ready()
        except WorkerFailure:
            pass

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def share_inputs(self, data: Any, output_shape: tuple[int, ...], output_dtype: torch.dtype) -> Any:
        """Copy `data` into memory shared with the worker, with an output slot of the expected
        layout; return the shared copy of `data` (the parent refills it in place later)."""
        tensors: list[torch.Tensor] = []
        tree = shared_memory.describe(data, tensors)
        pairs = [shared_memory.share(t) for t in tensors]
        slot_spec = shared_memory.spec_of(torch.empty(output_shape, dtype=output_dtype, device="meta"))
        slot_buffer = shared_memory.Buffer(shared_memory.nbytes_of(slot_spec), "cpu" if self.device.type == "cpu" else "cuda")
        buffers = [b for b, _ in pairs] + [slot_buffer]  # the tensors viewing them keep the mappings alive
        self._slot = shared_memory.view(slot_buffer, slot_spec)
        specs = [{"nbytes": b.nbytes, "device": b.device} for b in buffers]
        try:
            self._send({"op": "inputs", "tree": tree, "buffers": specs, "output": slot_spec}, fds=[b.fd for b in buffers])
        finally:  # sent or not: a failed send must not leave the case's memory held by open descriptors
            for b in buffers:
                b.close_fd()
        return shared_memory.rebuild(tree, [b for b, _ in pairs])

    def call(self, timed: bool, timeout: float, mark: Optional[str] = None,
             refill: Optional[Callable[[], None]] = None, method: Optional[str] = None,
             burst_s: float = 0.0) -> tuple[Any, CallTiming]:
        """One call of custom_kernel on the inputs last shared. Returns the parent's own copy of the
        output (or, when the output did not fit the slot, a description of what was returned) and
        the worker's raw timing of the call.

        `refill` (the CPU's timed calls: it copies new inputs into the shared ones) runs after the
        parent's clock started: a worker thread watching its inputs could otherwise compute the
        answer while the parent refilled them, before the clock (on the CPU the parent's clock is
        the time; on an NVIDIA GPU the profiler's audit counts such work; AMD GPUs have no audit).
        `method`: a diagnostic call timed the worker's other way (--diagnostics: "competition" or
        "isolated", harness/worker/timer.py; --energy: "burst", calls back to back for `burst_s`, counted
        in the timing's `calls`); its time is the worker's, on the CPU too."""
        self._slot.fill_(0)  # a stale slot must not pass for this call's answer
        if self.device.is_gpu:
            torch.cuda.synchronize()  # nothing of the parent's may overlap the worker's call on the GPU
        start = time.perf_counter()
        if refill is not None:
            refill()
            if self.device.is_gpu:  # (a fenced run's diagnostic call: the worker may start its kernels at once)
                torch.cuda.synchronize()
        self._send({"op": "call", "timed": bool(timed), "mark": mark, **({"method": method} if method else {}),
                    **({"seconds": burst_s} if burst_s else {})})
        reply = self._answer(timeout, "a call of custom_kernel", "output")
        round_trip = time.perf_counter() - start
        try:
            timing = CallTiming(_number(reply["device_s"]), _number(reply["host_s"]), _number(reply["tail_s"]),
                                tuple(_text(r, 80) for r in list(reply["replaced"])[:10]),
                                caught_up=reply.get("caught_up") is True, calls=_number(reply.get("calls", 1), count=True))
            layout = reply["layout"]
            described = OutputLayout(tuple(int(n) for n in list(layout["shape"])[:8]), _text(layout["dtype"], 40),
                                     _text(layout["device"], 20))
        except (KeyError, TypeError, ValueError, OverflowError):
            self._protocol_error(reply)
        if not self.device.is_gpu and not method:  # no profiler to audit a CPU worker's clock: the parent's own is used
            timing = CallTiming(round_trip, round_trip, 0.0, timing.replaced)
        if reply.get("copied") is not True:
            return described, timing
        return self._slot.clone(), timing

    # How long the parent waits for a fenced call to be enqueued before it opens the gate anyway (a
    # call that waits for the GPU itself, such as one reading `.tolist()`, is enqueued only after):
    # twice the longest recent enqueue, within these bounds.
    ENQUEUE_WAIT = (0.002, 0.2)

    def fenced_call(self, refill_rest: Callable[[], None], first: tuple, timeout: float,
                    watch_s: Optional[float] = None) -> tuple[Any, CallTiming]:
        """One timed call under the parent's fence (harness/parent/fence.py): the worker enqueues it behind
        the gate, the parent's stream refills the inputs (`refill_rest()`, then `first` = (shared
        first input, its new value)), flushes L2, opens the gate and takes a snapshot of the slot
        once the worker signals. Returns the snapshot (or what the worker returned, when it did not
        fit the slot) and the timing: `device_s` the parent's measurement, `host_s` how long the worker took to enqueue the call, `caught_up` whether the
        parent opened the gate before the call was enqueued. `watch_s`: the fence's watcher checks that
        DONE came after the output was final, waiting for DONE at most that long (harness/parent/fence.py,
        `run`)."""
        fence, deadline = self.fence, time.monotonic() + timeout
        seq = fence.next_seq()
        # 0xFF bytes: a stale slot must not pass for this call's answer, and a write after DONE changes
        # what the watcher sampled (a bf16 NaN is no correct answer)
        self._slot.view(-1).view(torch.uint8).fill_(0xFF)
        snapshot = torch.empty_like(self._slot)
        torch.cuda.synchronize()
        start = time.perf_counter()
        self._send({"op": "call", "timed": True, "fence": seq})
        low, high = self.ENQUEUE_WAIT
        wait = min(high, max(low, 2 * max(self._enqueue_times[-8:], default=0.0)))
        ready = self.worker.channel.wait_readable(min(wait, max(0.0, deadline - time.monotonic())))
        enqueued = time.perf_counter() - start
        try:
            reading = fence.run(seq, refill_rest, first, self._slot, snapshot, deadline, watch_s=watch_s)
            if reading is None:
                self.worker.kill()  # first: a worker still writing DONE or holding the GPU would keep the parent waiting
                raise WorkerFailure("timeout", f"timed out after {timeout:.0f} s: the call never signalled its end")
            held = fence.held(reading)
            if held:
                self.worker.kill()
                raise WorkerFailure("held the GPU", f"a kernel was still running when the call began ({held}): "
                                    "nothing may run on the GPU between calls")
            reply = self._answer(max(1.0, deadline - time.monotonic()), "a call of custom_kernel", "enqueued")
        except BaseException as failure:
            if isinstance(failure, KeyboardInterrupt):  # (SIGTERM too): the worker goes first, so the release is quick
                self.worker.kill()
            try:
                self._release(fence, seq)
            except WorkerFailure as stuck:  # the call's own reason first, then why the fence is gone
                if isinstance(failure, WorkerFailure):
                    raise WorkerFailure(stuck.kind, f"{failure}; then {stuck}") from None
                if isinstance(failure, KeyboardInterrupt):
                    raise failure from None  # an interrupt stays one
                raise
            raise
        if ready:
            self._enqueue_times.append(enqueued)
        else:
            enqueued = time.perf_counter() - start
        described, timing = self._collect_fenced(reply, reading, enqueued, ready, deadline)
        late = watch_problem(*fence.watch_verdict(snapshot, deadline))
        if late:
            raise WorkerFailure("early end", late)
        return (snapshot if reply.get("copied") is True else described), timing

    def _collect_fenced(self, reply: dict, reading: Any, enqueued: float, ready: bool,
                        deadline: float) -> tuple[OutputLayout, CallTiming]:
        """The fenced call's own reply read (its output's layout, its worker-side figures), and its timing."""
        self._send({"op": "collect"})
        own = self._answer(max(1.0, deadline - time.monotonic()), "the call's own timing", "output")
        try:
            timing = CallTiming(reading.call_s, enqueued, _number(own["tail_s"]),
                                tuple(_text(r, 80) for r in list(own["replaced"])[:10]), caught_up=not ready,
                                least_s=reading.least_s)
            layout = reply["layout"]
            described = OutputLayout(tuple(int(n) for n in list(layout["shape"])[:8]), _text(layout["dtype"], 40),
                                     _text(layout["device"], 20))
        except (KeyError, TypeError, ValueError, OverflowError):
            self._protocol_error(own)
        return described, timing

    def _release(self, fence: Any, seq: int) -> None:
        """The parent's stream freed after a fenced call failed: DONE written by the parent; where the
        stream stays held (a worker rewriting DONE, or holding every SM), the worker is ended and the
        release tried again; where even that fails, no later call is fenced (FenceError's text ends it)."""
        from harness.parent.fence import FenceError

        try:
            fence.release(seq)
        except (FenceError, RuntimeError):  # (a GPU fault under MPS reaches the parent's context too)
            self.worker.kill()
            try:
                fence.release(seq)
            except (FenceError, RuntimeError) as exc:
                self.fence, self.fence_note = None, f"not fenced ({exc})"
                raise WorkerFailure("timeout", str(exc)) from None

    def capture(self, timeout: float) -> tuple[bool, str]:
        """Ask the worker to capture the call in a CUDA graph and replay it from now on (until the
        next inputs). Returns (captured, why not)."""
        self._send({"op": "capture"})
        reply = self._answer(timeout, "capturing the call in a CUDA graph", "captured")
        return reply.get("ok") is True, _text(reply.get("message"))

    def profile(self, row_limit: int, timeout: float) -> str:
        self._send({"op": "profile", "rows": row_limit})
        reply = self._answer(timeout, "a profiled call", "profile")
        table = str(reply.get("table"))[:200_000]  # a table: its lines and column spacing kept, control codes not
        return "\n".join(printable(line) for line in table.splitlines())

    def close(self) -> None:
        self.worker.close()
        self._slot = None

    # -- plumbing
    def _send(self, msg: Any, fds: Sequence[int] = (), ready: bool = True) -> None:
        if ready:
            self.wait_ready()
        if self.worker.channel.pending():  # a reply sent before the question cannot be this call's
            if not self.worker.alive() or self.worker.channel.at_end():  # (gone, or going: its end is closed)
                raise self._death("before the next request")
            self.worker.kill()
            raise WorkerFailure("protocol", "the worker sent a message nobody asked for")
        if self._replied and self.worker.channel.unread():  # it answered without taking its requests
            self.worker.kill()
            raise WorkerFailure("protocol", "the worker answered without reading its requests (they are still "
                                "in its channel)")
        self._replied = False
        try:
            self.worker.channel.send(msg, fds, deadline=time.monotonic() + SEND_SECONDS)
        except ChannelTimeout:  # (an OSError: caught first)
            self.worker.kill()
            raise WorkerFailure("timeout", f"the worker did not take its request within {SEND_SECONDS} s "
                                "(it stopped reading its channel)") from None
        except OSError:
            raise self._death("while receiving inputs") from None

    def _answer(self, timeout: float, what: str, op: str) -> dict:
        """The worker's reply `op` to a request: its error as a WorkerFailure, anything else as a
        protocol failure."""
        reply = self._receive(timeout, what)
        if reply.get("op") == "error" and _kind(reply) in ERROR_KINDS:
            raise WorkerFailure(reply["kind"], _text(reply.get("message")))
        if reply.get("op") != op:
            self._protocol_error(reply)
        return reply

    def _receive(self, timeout: float, what: str) -> dict:
        try:
            reply, _ = self.worker.channel.recv(deadline=time.monotonic() + timeout)
        except ChannelTimeout:
            self.worker.kill()
            raise WorkerFailure("timeout", f"timed out after {timeout:.0f} s during {what}") from None
        except (ChannelClosed, ConnectionError):
            raise self._death(f"during {what}") from None
        except (ChannelError, OSError) as exc:
            self.worker.kill()
            raise WorkerFailure("protocol", f"malformed message from the worker during {what} ({exc}; did the "
                                "submission write to a descriptor it does not own?)") from None
        if not isinstance(reply, dict):
            self._protocol_error(reply)
        self._replied = True
        return reply

    def _death(self, when: str) -> WorkerFailure:
        what, sig = self.worker.how_it_ended()
        self.worker.kill()  # whatever it left running
        hint = " (likely out of host memory)" if sig == "SIGKILL" else ""
        return WorkerFailure("crashed", f"worker process {what}{hint} {when}")

    def _protocol_error(self, reply: Any):
        self.close()
        raise WorkerFailure("protocol", f"unexpected message from the worker: {_text(repr(reply), 100)}")


class OutputLayout(tuple):
    """What the worker said it returned, when it did not fit the output slot."""

    def __new__(cls, shape: tuple[int, ...], dtype: str, device: str):
        return super().__new__(cls, (shape, dtype, device))

    shape = property(lambda self: self[0])
    dtype = property(lambda self: self[1])
    device = property(lambda self: self[2])


def _number(value: Any, count: bool = False) -> Any:
    """A finite number from a reply (`count`: a whole number of calls, at least one)."""
    if isinstance(value, bool) or not isinstance(value, int if count else (int, float)) or not math.isfinite(value) \
            or count and not 1 <= value <= 2**40:
        raise ValueError(value)
    return value if count else float(value)


# The kinds of failure a worker reports (harness/worker/loop.py). A failure's reason starts with
# its kind, so any other kind is a malformed message: the reason's first words stay the parent's.
FATAL_KINDS = frozenset({"syntax error", "import error", "no custom_kernel"})
ERROR_KINDS = frozenset({"exception", "out of memory", "bad output"})


def _kind(reply: dict) -> Optional[str]:
    """A failure reply's kind, if it is text (a list or an object would not even hash)."""
    kind = reply.get("kind")
    return kind if isinstance(kind, str) else None


def _text(value: Any, limit: int = 400) -> str:
    """Worker-supplied text as one printable line (no terminal control sequences)."""
    return printable_line(str(value)[:limit * 4])[:limit]
