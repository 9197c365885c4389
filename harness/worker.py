"""The untrusted side: a child process that imports one submission and runs calls on command.

Nothing here is trusted for a verdict. The parent sends inputs (shared memory / CUDA IPC), asks
for calls, and judges what comes back; expected outputs, seeds and the check never enter this
process. The worker's stdout and stderr go to a log file, so a submission cannot print into the
harness's report.

Protocol (parent -> worker, worker -> parent), all tuples:
  worker: ("ready", info) | ("fatal", kind, message)            after importing the submission
  parent: ("inputs", data)        keep these tensors; the parent refills them in place later
  parent: ("call", timed)         call custom_kernel once
                                  -> ("output", tensor, device_s, host_s, tail_s, replaced_timer_names)
  parent: ("capture",)            capture one call in a CUDA graph; later calls replay it, until the
                                  next inputs -> ("captured", ok, message)
  parent: ("profile", row_limit)  one call under torch.profiler -> ("profile", table)
  parent: ("exit",)
  any failing call -> ("error", kind, message)
"""

from __future__ import annotations

import importlib.util
import os
import sys
import traceback
from pathlib import Path
from typing import Any


def main(conn: Any, submission: str, repo_root: str, log_path: str, device_type: str, l2_bytes: int) -> None:
    _redirect_output(log_path)
    sys.path.insert(0, repo_root)
    import torch  # does not import triton

    if device_type == "auto":  # started before the parent looked: the same choice as an unset --device
        device_type = "cuda" if torch.cuda.is_available() else "cpu"
    if device_type == "cpu":  # Triton kernels run in its interpreter on the CPU (set before triton loads)
        os.environ.setdefault("TRITON_INTERPRET", "1")

    from harness import compat
    from harness.timing import CallTimer, capture_graph

    compat.install()
    if device_type == "cuda" and not l2_bytes:  # started before the parent looked at the GPU
        from harness.device import gpu_l2_bytes

        l2_bytes = gpu_l2_bytes()
    timer = CallTimer(device_type, l2_bytes)  # before the import: it keeps the original timer functions
    try:
        kernel = _load(submission)
    except _LoadError as exc:
        conn.send(("fatal", exc.kind, str(exc)))
        return
    conn.send(("ready", {"pid": os.getpid()}))

    data = None
    call = kernel         # or a CUDA-graph replay of it, after "capture"
    last_output = None  # kept alive until the parent has copied it (CUDA IPC needs the producer alive)
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        op = msg[0]
        if op == "exit":
            return
        if op == "inputs":
            data, call = msg[1], kernel
            continue
        try:
            if op == "capture":
                try:
                    call = capture_graph(kernel, data)
                    conn.send(("captured", True, ""))
                except Exception as exc:  # not capturable: plain calls go on
                    traceback.print_exc()
                    call = kernel
                    if timer.gpu:
                        torch.cuda.synchronize()
                    conn.send(("captured", False, one_line(exc)))
            elif op == "call":
                last_output = None
                out, timing = timer(call, data, timed=msg[1])
                problem = _hygiene(out, data)
                if problem:
                    conn.send(("error", "bad output", problem))
                    continue
                last_output = out  # noqa: F841 (held until the next call: the parent maps it over IPC)
                conn.send(("output", out, timing.device_s, timing.host_s, timing.tail_s, timing.replaced))
            elif op == "profile":
                conn.send(("profile", _profile(kernel, data, msg[1])))
        except BaseException as exc:  # the submission's fault (SystemExit included): report it, keep serving
            traceback.print_exc()
            oom = isinstance(exc, (torch.OutOfMemoryError, MemoryError)) or "can't allocate memory" in str(exc)
            kind = "out of memory" if oom else "exception"
            conn.send(("error", kind, one_line(exc)))


class _LoadError(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def _load(path: str):
    """Import the submission file and return its custom_kernel, or raise _LoadError."""
    source = Path(path)
    spec = importlib.util.spec_from_file_location("submission", source)
    module = importlib.util.module_from_spec(spec)
    sys.modules["submission"] = module
    sys.path.insert(0, str(source.parent))
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise _LoadError("syntax error", f"syntax error at line {exc.lineno}: {exc.msg}") from None
    except ImportError as exc:
        name = getattr(exc, "name", None)
        hint = ""
        if name and name.split(".")[0] in ("aiter", "hip", "triton_kernels"):
            hint = f" ({name.split('.')[0]} is an AMD ROCm package; this machine does not have it)"
        traceback.print_exc()
        raise _LoadError("import error", f"{one_line(exc)}{hint}") from None
    except BaseException as exc:  # anything at import time, SystemExit included
        traceback.print_exc()
        raise _LoadError("import error", f"failed while importing: {one_line(exc)}") from None
    kernel = getattr(module, "custom_kernel", None)
    if kernel is None:
        raise _LoadError("no custom_kernel", "defines no custom_kernel(data) function")
    if not callable(kernel):
        raise _LoadError("no custom_kernel", f"custom_kernel is a {type(kernel).__name__}, not a function")
    return kernel


def _hygiene(out: Any, data: Any) -> str | None:
    """First, cheap checks done where the output lives; the parent checks again what it receives."""
    import torch

    from harness.verdict import tensors

    if not isinstance(out, torch.Tensor):
        return f"custom_kernel returned {type(out).__name__}, expected a torch.Tensor"
    if type(out) is not torch.Tensor:
        return f"output tensor is a subclass of torch.Tensor ({type(out).__name__})"
    for _, t in tensors(data):
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
    return prof.key_averages().table(sort_by=sort, row_limit=row_limit)


def _redirect_output(log_path: str) -> None:
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)


def one_line(exc: BaseException) -> str:
    """An exception as one line: its type, then its message with whitespace collapsed, cut at 300."""
    text = " ".join(str(exc).split())
    if len(text) > 300:
        text = text[:297] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
