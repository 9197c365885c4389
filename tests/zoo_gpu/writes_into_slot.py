"""Tries: keep the output's copy into the slot out of its ranked number by computing the answer straight
into the slot. A fenced call's worker side is `wait GATE, the call, slot.copy_(out), DONE`
(harness/worker/loop.py `_fenced_call`) and the null calls subtract only the GATE -> DONE hand-over,
so every honest file's number holds one device-to-device copy of the output (64 KiB at 4x1k, 4 MiB at
256 x anything). This file wraps `loop._fenced_call` to learn the slot, runs the bundled triton_bf16
kernel with the output's `torch.empty` answered by the slot, and returns the slot: `slot.copy_(slot)`
returns at once in ATen.
SUBMISSION_SLOT_DONE=kernel also writes DONE itself, from a one-program Triton kernel queued right after
triton_bf16's last one (a release store at system scope), instead of leaving it to the loop's stream
write after its (empty) copy: whether a DONE stored by a kernel reaches the parent sooner than the
stream's own write, which the null calls pay and subtract (docs/threat-model.md, "Still open" (3):
the last block's DONE).
Must get: passes, ranked below triton_bf16 in the same run by at most one output copy per call (a known
bound, docs/threat-model.md; BENCHMARKS.md has the measured gap); with SUBMISSION_SLOT_DONE=kernel, no
faster than without. Unfenced, and on the CPU: exactly triton_bf16 (the slot is taken only in fenced
calls)."""
import importlib.util
import os
from pathlib import Path

import torch
import triton
import triton.language as tl

_spec = importlib.util.spec_from_file_location(
    "bundled_bf16", Path(__file__).resolve().parents[2] / "submissions" / "triton_bf16.py")
if not (Path(__file__).resolve().parents[2] / "submissions" / "triton_bf16.py").exists():  # standalone copy
    _spec = importlib.util.spec_from_file_location("bundled_bf16", "/work/main/submissions/triton_bf16.py")
_bundled = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_bundled)

_state: dict = {}


class _TorchWithSlot:
    """`torch` as triton_bf16 sees it during a fenced call: `empty` of the output's shape is the slot."""

    def __init__(self, slot):
        self._slot = slot

    def empty(self, *shape, dtype=None, device=None, **kw):
        s = self._slot
        if tuple(shape) == tuple(s.shape) and dtype == s.dtype and s.is_contiguous():
            return s
        return torch.empty(*shape, dtype=dtype, device=device, **kw)

    def __getattr__(self, name):
        return getattr(torch, name)


def _install():
    from harness.worker import loop

    original = loop._fenced_call

    def patched(call, data, slot, timer, flags, seq):
        _state["slot"], _state["done"] = slot, (flags, seq)
        try:
            return original(call, data, slot, timer, flags, seq)
        finally:
            _state.pop("slot", None)
            _state.pop("done", None)

    loop._fenced_call = patched  # main() looks the name up at every call


SIGNAL = os.environ.get("SUBMISSION_SLOT_DONE", "loop")  # loop | kernel


@triton.jit(do_not_specialize=["value"])
def _store_done(done_ptr, value):
    """DONE := value from the GPU, ordered after this program's earlier writes for every observer."""
    tl.atomic_xchg(done_ptr, value, sem="release", scope="sys")


if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1":
    _install()
    if SIGNAL == "kernel":  # compiled and loaded now: a first launch behind GATE would wait for an idle GPU
        _scratch = torch.zeros(8, dtype=torch.int32, device="cuda")
        _store_done[(1,)](_scratch[1:], 0, num_warps=1)  # (as DONE: 4 bytes past 16-byte alignment)
        torch.cuda.synchronize()


def custom_kernel(data):
    slot = _state.get("slot")
    if slot is None:
        return _bundled.custom_kernel(data)
    _bundled.torch = _TorchWithSlot(slot)  # (its plans' scratch buffers are made in warm-up calls, unfenced)
    try:
        out = _bundled.custom_kernel(data)  # the slot itself: loop's slot.copy_(out) does nothing
    finally:
        _bundled.torch = torch
    if SIGNAL == "kernel":
        from harness.worker.shared_memory import DONE

        flags, seq = _state["done"]
        _store_done[(1,)](flags.buffer.bytes_tensor()[DONE:DONE + 4].view(torch.int32), seq, num_warps=1)
    return out
