"""The trusted parent's handle on one untrusted worker process.

Spawns `harness.worker.main` in a fresh interpreter, sends it inputs, asks for calls with a
deadline, and reads its answers through a restricted unpickler: a message from the worker can
rebuild plain tensors (shared memory or CUDA IPC) and builtin values, nothing else. So a tensor
subclass, or any object whose unpickling would run code from the submission, cannot reach the
parent.
"""

from __future__ import annotations

import io
import pickle
import time
from pathlib import Path
from typing import Any, Optional

import torch
import torch.multiprocessing  # noqa: F401 (registers the reductions that send tensors through pipes)

from harness.device import DeviceInfo
from harness.prestart import how_it_ended, start_worker, stop
from harness.timing import CallTiming

MAX_MESSAGE_BYTES = 1 << 26  # messages carry tensor handles, not tensor data


class WorkerFailure(Exception):
    """The submission failed in a way that ends a call: `kind` is a short category, the message
    one line a competitor understands."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.fatal = kind in ("crashed", "timeout", "startup", "protocol")


_REBUILDERS = ("rebuild_tensor", "rebuild_cuda_tensor", "rebuild_typed_storage", "rebuild_typed_storage_child",
               "rebuild_storage_fd", "rebuild_storage_filename", "rebuild_storage_empty")
_ALLOWED = {("torch.multiprocessing.reductions", n) for n in _REBUILDERS} | {
    ("torch", "Tensor"), ("torch", "Size"), ("torch", "device"),
    ("torch.storage", "UntypedStorage"), ("torch.storage", "TypedStorage"),
    ("multiprocessing.resource_sharer", "DupFd"), ("collections", "OrderedDict"),
}


class UnsafeMessage(Exception):
    pass


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED or (module == "torch" and isinstance(getattr(torch, name, None), torch.dtype)):
            return super().find_class(module, name)
        raise UnsafeMessage(f"{module}.{name}")


def safe_loads(payload: bytes) -> Any:
    return _RestrictedUnpickler(io.BytesIO(payload)).load()


class Sandbox:
    """One worker process for one submission. Use as a context manager."""

    def __init__(self, submission: Path, device: DeviceInfo, log_path: Path, startup_timeout: float,
                 started: Optional[tuple[Any, Any]] = None):
        """Start the worker, or adopt one `prestart.start_worker` started earlier (`started`)."""
        self.submission, self.log_path = submission, log_path
        self._proc, self._conn = started or start_worker(submission, device.type, log_path, device.l2_bytes)
        self._startup_timeout, self._ready = startup_timeout, False

    def wait_ready(self) -> None:
        """Wait for the worker to import the submission (starting it does not wait, so the parent
        can work meanwhile). Raises WorkerFailure when the import fails."""
        if self._ready:
            return
        reply = self._receive(self._startup_timeout, "starting the worker and importing the submission")
        if reply[0] == "fatal":
            self.close()
            raise WorkerFailure(str(reply[1]), str(reply[2]))
        if reply[0] != "ready":
            self._protocol_error(reply)
        self._ready = True

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def send_inputs(self, data: Any) -> None:
        self._send(("inputs", data))

    def call(self, timed: bool, timeout: float) -> tuple[torch.Tensor, CallTiming]:
        """One call of custom_kernel on the inputs last sent. Returns a private copy of the output
        and the worker's raw timing of the call."""
        self._send(("call", timed))
        reply = self._receive(timeout, "a call of custom_kernel")
        if reply[0] == "error":
            raise WorkerFailure(str(reply[1]), str(reply[2]))
        if reply[0] != "output" or len(reply) != 6:
            self._protocol_error(reply)
        _, out, device_s, host_s, tail_s, replaced = reply
        if type(out) is not torch.Tensor:
            raise WorkerFailure("bad output", f"custom_kernel returned {type(out).__name__}, expected a torch.Tensor")
        copy = out.clone()  # our own memory: the worker may reuse or free its buffer after this
        del out
        try:
            timing = CallTiming(float(device_s), float(host_s), float(tail_s), tuple(str(r) for r in replaced))
        except (TypeError, ValueError):
            self._protocol_error(reply)
        return copy, timing

    def capture(self, timeout: float) -> tuple[bool, str]:
        """Ask the worker to capture the call in a CUDA graph and replay it from now on (until the
        next inputs). Returns (captured, why not)."""
        self._send(("capture",))
        reply = self._receive(timeout, "capturing the call in a CUDA graph")
        if reply[0] == "error":
            raise WorkerFailure(str(reply[1]), str(reply[2]))
        if reply[0] != "captured" or len(reply) != 3:
            self._protocol_error(reply)
        return bool(reply[1]), str(reply[2])

    def profile(self, row_limit: int, timeout: float) -> str:
        self._send(("profile", row_limit))
        reply = self._receive(timeout, "a profiled call")
        if reply[0] == "error":
            raise WorkerFailure(str(reply[1]), str(reply[2]))
        return str(reply[1])

    def close(self) -> None:
        stop(self._proc, self._conn, ("exit",), grace=5)

    # -- plumbing
    def _send(self, msg: Any) -> None:
        self.wait_ready()
        try:
            self._conn.send(msg)
        except (BrokenPipeError, ConnectionResetError, EOFError, OSError):
            raise self._death("while receiving inputs") from None

    def _receive(self, timeout: float, what: str) -> tuple:
        deadline = time.monotonic() + timeout
        while not self._conn.poll(min(1.0, max(0.0, deadline - time.monotonic()))):
            if not self._proc.is_alive():
                raise self._death(f"during {what}")
            if time.monotonic() >= deadline:
                self._proc.kill()
                self._proc.join(timeout=5)
                raise WorkerFailure("timeout", f"timed out after {timeout:.0f} s during {what}")
        try:
            payload = self._conn.recv_bytes(maxlength=MAX_MESSAGE_BYTES)
        except EOFError:
            raise self._death(f"during {what}") from None
        except OSError:  # a length header that makes no sense: someone else wrote into our pipe
            self._proc.kill()
            self._proc.join(timeout=5)
            raise WorkerFailure("protocol", f"malformed message from the worker during {what} (did the "
                                "submission write to a file descriptor it does not own?)") from None
        try:
            reply = safe_loads(payload)
        except UnsafeMessage as exc:
            raise WorkerFailure("bad output", f"output is not a plain torch.Tensor (it references {exc})") from None
        except Exception as exc:
            raise WorkerFailure("protocol", f"unreadable message from the worker: {type(exc).__name__}: {exc}") from None
        if not isinstance(reply, tuple) or not reply:
            self._protocol_error(reply)
        return reply

    def _death(self, when: str) -> WorkerFailure:
        what, sig = how_it_ended(self._proc)
        hint = " (likely out of host memory)" if sig == "SIGKILL" else ""
        return WorkerFailure("crashed", f"worker process {what}{hint} {when}")

    def _protocol_error(self, reply: Any):
        self.close()
        raise WorkerFailure("protocol", f"unexpected message from the worker: {str(reply)[:100]}")
