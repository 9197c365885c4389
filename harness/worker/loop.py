"""The worker: imports one submission and runs calls on command, inside the sandbox.

Nothing here is trusted for a verdict. The parent maps the case's inputs and one output slot into
this process (harness/worker/shared_memory.py), asks for calls, and judges what lands in the slot;
expected outputs, seeds and the check never enter this process. Replies are small JSON messages
(harness/worker/channel.py). stdout and stderr are the submission's log file, opened by the parent.

Protocol (parent -> worker, worker -> parent):
  worker: {"op": "ready"} | {"op": "fatal", kind, message}       after importing the submission
  parent: {"op": "inputs", tree, output} + one descriptor per tensor, then the output slot's
  parent: {"op": "call", timed, mark}  call custom_kernel once, copy its output into the slot
                                        -> {"op": "output", copied, layout, device_s, host_s, tail_s, caught_up, replaced}
  parent: {"op": "call", timed, fence: seq}  (fenced GPU runs, harness/parent/fence.py) enqueue the call behind
                                       the GATE flag, the output's copy and DONE := seq, without waiting
                                        -> {"op": "enqueued", copied, layout, host_s}
          then {"op": "collect"}       -> {"op": "output", ... as above, without device_s: no events are
                                       recorded around a fenced call)
  parent: {"op": "capture"}            capture one call in a CUDA graph; later calls replay it, until
                                       the next inputs -> {"op": "captured", ok, message}
  parent: {"op": "profile", rows}      one call under torch.profiler -> {"op": "profile", table}
  parent: {"op": "exit"}
Before the submission is imported, a worker started with MLA_EVAL_FENCE=1 on an NVIDIA GPU says
{"op": "fence-ready"}; the parent answers {"op": "fence", nbytes} + the flags' descriptor (or nothing),
any number of {"op": "null", seq, nbytes, steps} (GATE, the named steps of NULL_STEPS, DONE -> {"op":
"enqueued"}: the fence's own cost, measured while nothing of the submission's exists; the output's
copy into the slot is the call's: a submission could leave it out), then {"op": "import"}.
  any failing call -> {"op": "error", kind, message}
`mark` (audit runs): an NVTX range pushed around the call and the copy, so the profiler can tell
the calls apart.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import traceback
from pathlib import Path
from typing import Any

from harness.worker.channel import WORKER_LIMIT, Channel, ChannelClosed, one_line
from harness.worker.fence_side import fence_phase


def main(channel: Channel, submission: str, device_type: str, l2_bytes: int) -> None:
    import torch  # does not import triton

    from harness.worker.shared_memory import Buffer, rebuild, view
    from harness.worker.timer import capture_graph

    started = _start(channel, submission, device_type, l2_bytes)
    if started is None:
        return
    timer, flags, kernel = started
    data = slot = None
    call = kernel  # or a CUDA-graph replay of it, after "capture"
    while True:
        try:
            msg, fds = channel.recv(want_fds=True)
        except (ChannelClosed, OSError):
            return
        op = msg.get("op")
        if op == "exit":
            return
        try:
            if op == "inputs":
                buffers = [Buffer(spec["nbytes"], spec["device"], fd) for spec, fd in zip(msg["buffers"], fds)]
                for b in buffers:
                    b.close_fd()
                data, slot, call = rebuild(msg["tree"], buffers), view(buffers[-1], msg["output"]), kernel
            elif op == "capture":
                try:
                    call = capture_graph(kernel, data)
                    channel.send({"op": "captured", "ok": True, "message": ""})
                except Exception as exc:  # not capturable: plain calls go on
                    _log_traceback()
                    call = kernel
                    if timer.gpu:
                        torch.cuda.synchronize()
                    channel.send({"op": "captured", "ok": False, "message": _reason(exc, submission)})
            elif op == "call" and msg.get("fence") is not None and flags is not None:
                seq = int(msg["fence"])
                reply, pending = _fenced_call(call, data, slot, timer, flags, seq)
                channel.send(reply)
                if pending is not None and reply["op"] == "enqueued":
                    collect, _ = channel.recv()
                    if collect.get("op") == "collect":
                        channel.send(pending())
            elif op == "call" and msg.get("method") in timer.DIAGNOSTIC_METHODS:
                with _on_call_stream(flags):
                    channel.send(_call(call, data, slot, timer, True, None, msg["method"], msg.get("seconds")))
            elif op == "call":
                with _on_call_stream(flags):
                    channel.send(_call(call, data, slot, timer, bool(msg.get("timed")), msg.get("mark")))
            elif op == "profile":
                channel.send({"op": "profile", "table": _profile(kernel, data, int(msg.get("rows", 12)))})
        except BaseException as exc:  # the submission's fault (SystemExit included): report it, keep serving
            _log_traceback()
            oom = isinstance(exc, (torch.OutOfMemoryError, MemoryError)) or "can't allocate memory" in str(exc)
            channel.send({"op": "error", "kind": "out of memory" if oom else "exception",
                          "message": _reason(exc, submission)})


def _start(channel: Channel, submission: str, device_type: str, l2_bytes: int):
    """The worker's start: its device, the timer (before the import: it keeps the original timer
    functions), the fence's phase, then the submission imported and "ready" sent; (timer, the fence's
    flags or None, custom_kernel), or None when the file could not be loaded (the parent was told)."""
    import torch

    if device_type == "auto":  # started before the parent looked: the same choice as an unset --device
        device_type = "cuda" if torch.cuda.is_available() else "cpu"
    if device_type == "cpu":  # Triton kernels run in its interpreter on the CPU (set before triton loads)
        os.environ.setdefault("TRITON_INTERPRET", "1")

    from harness.worker import compat
    from harness.worker.timer import CallTimer

    compat.install()
    if device_type == "cuda" and not l2_bytes:
        l2_bytes = int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or 0) or 256 * 2**20
    timer = CallTimer(device_type, l2_bytes)
    if timer.gpu:
        print(f"worker: persisting-L2 reset before each flush: {'on' if timer._reset_l2 else 'not available'}",
              flush=True)
    flags = fence_phase(channel, timer) if timer.gpu and os.environ.get("MLA_EVAL_FENCE") == "1" else None
    try:
        kernel = _load(submission)
    except _LoadError as exc:
        channel.send({"op": "fatal", "kind": exc.kind, "message": str(exc)})
        return None
    channel.send({"op": "ready"})
    return timer, flags, kernel


def _call(call, data: Any, slot: Any, timer: Any, timed: bool, mark: Any, method: Any = None,
          seconds: Any = None) -> dict[str, Any]:
    import torch

    if mark:
        torch.cuda.nvtx.range_push(str(mark))
    try:
        out, timing = (timer.diagnose(call, data, method, float(seconds or 0.0)) if method
                       else timer(call, data, timed=timed))
        problem = _hygiene(out, data)
        if problem:
            return {"op": "error", "kind": "bad output", "message": problem}
        layout = {"shape": list(out.shape), "dtype": str(out.dtype).removeprefix("torch."), "device": out.device.type}
        copied = tuple(out.shape) == tuple(slot.shape) and out.dtype == slot.dtype and out.device.type == slot.device.type
        if copied:
            slot.copy_(out)
            if slot.device.type != "cpu":
                torch.cuda.synchronize()
    finally:
        if mark:
            torch.cuda.nvtx.range_pop()
    return {"op": "output", "copied": copied, "layout": layout, **timing}


def _on_call_stream(flags: Any):
    """A fenced worker's other calls (warm-ups, tests, its own event-timed ones) on the stream its
    fenced calls run on (harness/worker/shared_memory.py, `call_stream`), so that what a call sets up
    per stream (the allocator's cached blocks, a library's workspace) is there before the first timed
    one; unfenced, nothing changes."""
    if flags is None:
        return contextlib.nullcontext()
    import torch

    from harness.worker.shared_memory import call_stream

    return torch.cuda.stream(call_stream())


def _fenced_call(call, data: Any, slot: Any, timer: Any, flags: Any, seq: int):
    """The call enqueued behind the parent's GATE, its output copied into the slot, DONE := seq, all
    without waiting for the GPU; (the reply, a function giving the later "output" reply or None).
    DONE is written whatever happens, so the parent's stream never waits on a call that failed."""
    import torch

    from harness.worker.shared_memory import DONE, GATE, call_stream

    stream = call_stream()  # (not the legacy default stream: its kernels slow while the parent waits on DONE)
    with torch.cuda.stream(stream):
        flags.wait(stream, GATE, seq)  # (no events of the worker's in the interval: they cost ~5 µs under MPS)
        start = timer._perf()
        try:
            out = call(data)
            host = timer._perf() - start
            timer._host_times.append(host)  # (the busy work that hides launches in its event-timed calls)
            problem = _hygiene(out, data)
            if problem:
                return {"op": "error", "kind": "bad output", "message": problem}, None
            layout = {"shape": list(out.shape), "dtype": str(out.dtype).removeprefix("torch."),
                      "device": out.device.type}
            copied = (tuple(out.shape) == tuple(slot.shape) and out.dtype == slot.dtype
                      and out.device.type == slot.device.type)
            if copied:
                with torch.cuda.stream(stream):  # (ordered before DONE whatever stream the call left current)
                    slot.copy_(out)
        finally:
            flags.write(stream, DONE, seq)

    def output() -> dict[str, Any]:
        tail_start = timer._perf()
        timer._sync()
        tail = timer._perf() - tail_start
        return {"op": "output", "copied": copied, "layout": layout, "host_s": host, "tail_s": tail,
                "caught_up": False, "replaced": list(timer.replaced())}

    output.keep = out  # the output lives until its copy into the slot has run
    return {"op": "enqueued", "copied": copied, "layout": layout, "host_s": host}, output


def _log_traceback() -> None:
    """The traceback into the log, unless the log cannot take it (full: see LOG_LIMIT in
    harness/parent/launch.py)."""
    try:
        traceback.print_exc()
    except OSError:
        pass


REASON_LIMIT = 360  # a reason's characters, its place included (the parent keeps 400: harness/parent/sandbox.py)
PLACE_NAME_LIMIT = 60  # the file name in a place, at most


def _place(exc: BaseException, path: str) -> str:
    """Where in the submission `exc` came from: " (file.py:LINE)" for the innermost frame of its
    traceback that runs the submission file (compiled with `path` as its file name: load_module),
    or "" when no frame does (raised outside the file's own code)."""
    try:
        where = str(Path(path))
        line = next((lineno for frame, lineno in reversed(list(traceback.walk_tb(exc.__traceback__)))
                     if frame.f_code.co_filename == where and lineno), None)
        if line is None:
            return ""
        name = Path(where).name
        if len(name) > PLACE_NAME_LIMIT:
            name = name[:PLACE_NAME_LIMIT - 3] + "..."
        return f" ({name}:{line})"
    except Exception:  # (a report must never fail)
        return ""


def _reason(exc: BaseException, path: str, prefix: str = "", suffix: str = "") -> str:
    """One line: `prefix`, the exception (type and message), `suffix`, then its place in the
    submission file at `path` (_place); the text is cut so the place always fits in REASON_LIMIT."""
    place = _place(exc, path)
    text = f"{prefix}{one_line(exc)}{suffix}"
    room = REASON_LIMIT - len(place)
    if len(text) > room:
        text = text[:room - 3] + "..."
    return text + place


class _LoadError(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def load_module(path: "str | Path", name: str = "submission"):
    """Import a submission file as the module `name`, its folder first on the import path (as a
    competition's runner does); exceptions propagate. The one submission loader: the worker, the
    tools and the tests use it. The module is compiled from the file's own bytes, the ones the
    parent hashed and scanned: Python's loader would run a cached `__pycache__/*.pyc` beside it
    instead, and an unchecked-hash one is never compared with the source."""
    source = Path(path)
    spec = importlib.util.spec_from_file_location(name, source)
    module = importlib.util.module_from_spec(spec)
    module.__cached__ = None
    sys.modules[name] = module
    sys.path.insert(0, str(source.parent))
    exec(compile(source.read_bytes(), str(source), "exec", dont_inherit=True), module.__dict__)
    return module


def _load(path: str):
    """Import the submission file and return its custom_kernel, or raise _LoadError. A failure's
    message ends with its place in the file (_place)."""
    try:
        module = load_module(path)
    except SyntaxError as exc:
        if exc.filename != str(Path(path)):  # another file's, or one the code raised: an import failure
            _log_traceback()
            raise _LoadError("import error", _reason(exc, path, prefix="failed while importing: ")) from None
        where = f" at line {exc.lineno}" if exc.lineno else ""
        raise _LoadError("syntax error", f"syntax error{where}: {exc.msg}") from None
    except ImportError as exc:
        name = getattr(exc, "name", None)
        hint = ""
        if name and name.split(".")[0] in ("aiter", "hip", "triton_kernels"):
            hint = f" ({name.split('.')[0]} is an AMD ROCm package; this machine does not have it)"
        _log_traceback()
        raise _LoadError("import error", _reason(exc, path, suffix=hint)) from None
    except BaseException as exc:  # anything at import time, SystemExit included
        _log_traceback()
        raise _LoadError("import error", _reason(exc, path, prefix="failed while importing: ")) from None
    kernel = getattr(module, "custom_kernel", None)
    if kernel is None:
        raise _LoadError("no custom_kernel", "defines no custom_kernel(data) function")
    if not callable(kernel):
        raise _LoadError("no custom_kernel", f"custom_kernel is a {type(kernel).__name__}, not a function")
    return kernel


def _tensors(tree: Any):
    import torch

    if isinstance(tree, torch.Tensor):
        yield tree
    elif isinstance(tree, (tuple, list)):
        for x in tree:
            yield from _tensors(x)
    elif isinstance(tree, dict):
        for x in tree.values():
            yield from _tensors(x)


def _hygiene(out: Any, data: Any) -> str | None:
    """Cheap checks where the output lives, for clear messages; the parent judges the values it
    receives whatever this says."""
    import torch

    if not isinstance(out, torch.Tensor):
        return f"custom_kernel returned {type(out).__name__}, expected a torch.Tensor"
    if type(out) is not torch.Tensor:
        return f"output tensor is a subclass of torch.Tensor ({type(out).__name__})"
    for t in _tensors(data):
        if out.untyped_storage().data_ptr() == t.untyped_storage().data_ptr():
            return "output tensor shares memory with an input tensor"
    return None


def _profile(kernel, data, row_limit: int) -> str:
    import torch
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof:
        kernel(data)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    sort = "self_cuda_time_total" if torch.cuda.is_available() else "self_cpu_time_total"
    return prof.key_averages().table(sort_by=sort, row_limit=row_limit)[:200_000]


def entry(argv: list[str]) -> None:
    """`python harness/worker/__main__.py FD SUBMISSION DEVICE L2_BYTES [FILE_LIMIT]` (started by
    harness/parent/launch.py)."""
    import socket

    fd, submission, device_type, l2 = int(argv[0]), argv[1], argv[2], int(argv[3])
    channel = Channel(socket.socket(fileno=fd), WORKER_LIMIT)
    try:
        main(channel, submission, device_type, l2)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)  # no atexit hooks of the submission's, no waiting on its threads
