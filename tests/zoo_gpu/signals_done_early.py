"""Tries: end the parent's clock before the call's last step, by writing DONE early so that the last
step overlaps the parent's wake-up on DONE (part of the fence's cost, measured by null calls and
subtracted: harness/parent/fence.py). A fenced call's worker side is `wait GATE, the call,
slot.copy_(out), DONE := seq` (harness/worker/loop.py `_fenced_call`). Here, on fenced calls whose
output is at most SUBMISSION_EARLY_DONE_BYTES (default 512 KiB: the 4x and 32x cases), DONE := seq is
written on the call's own stream right after triton_bf16's kernels, before the loop's copy into the
slot, so the copy (~3 µs at 64-512 KiB on the H100) races the parent's wake-up.
SUBMISSION_EARLY_DONE=combine writes DONE before triton_bf16's combine kernel instead (split-K plans:
the combine and the copy race the wake-up); =tail copies all but the last sixteenth of the output into
the slot itself, then writes DONE, so only the tail is written after it (the loop's copy rewrites the
rest with the same values); =off never. The work is honest (the bundled triton_bf16
kernel, loaded as forges_fence.py does) and the loop's own DONE follows as usual (GPU only).
Must get: fenced with the DONE watcher on (Fence.watch_done), rejected: "watched call N: early end"
(harness/parent/watcher.py, in a call drawn to be watched, sampled the slot the moment DONE was
written, and the copy or the combine changed it afterwards); or rejected on the parent's
snapshot ("timed call N: ..."); never a pass faster than triton_bf16 in the same run: the parent's
clock must not close before the output is complete, whatever the worker signals (docs/threat-model.md,
"Still open" (3)). Unfenced, and on the CPU: exactly triton_bf16."""
import importlib.util
import os
from pathlib import Path

import torch

from harness.worker.shared_memory import DONE

_spec = importlib.util.spec_from_file_location(
    "bundled_bf16", Path(__file__).resolve().parents[2] / "submissions" / "triton_bf16.py")
_bundled = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_bundled)

MODE = os.environ.get("SUBMISSION_EARLY_DONE", "copy")  # copy | combine | tail | off
EARLY_BYTES = int(os.environ.get("SUBMISSION_EARLY_DONE_BYTES", str(512 * 1024)))
_state: dict = {}
_launch = _bundled._launch


def _launch_signalling(plan, kernel, grid, args, constexprs, options):
    """triton_bf16's launcher (its custom_kernel looks `_launch` up at every call): a pending DONE is
    written on the call's stream just before the combine kernel is enqueued."""
    if kernel is _bundled._combine_splits_kernel:
        signal = _state.pop("before_combine", None)
        if signal is not None:
            signal()
    return _launch(plan, kernel, grid, args, constexprs, options)


def _install():
    from harness.worker import loop

    original = loop._fenced_call

    def patched(call, data, slot, timer, flags, seq):
        _state["fence"] = (flags, seq, slot.numel() * slot.element_size(), slot)
        try:
            return original(call, data, slot, timer, flags, seq)
        finally:
            _state.pop("fence", None)
            _state.pop("before_combine", None)

    loop._fenced_call = patched  # main() looks the name up at every call
    _bundled._launch = _launch_signalling


if MODE != "off" and torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1":
    _install()


def custom_kernel(data):
    fence = _state.get("fence")
    if fence is None or fence[2] > EARLY_BYTES:  # unfenced (warm-ups, tests, the CPU), or a long copy
        return _bundled.custom_kernel(data)
    flags, seq, _, slot = fence
    stream = torch.cuda.current_stream()  # the call's stream, behind GATE (loop's `call_stream`)

    def signal():
        flags.write(stream, DONE, seq)

    if MODE == "combine":
        _state["before_combine"] = signal
    out = _bundled.custom_kernel(data)
    if MODE == "tail" and out.shape == slot.shape and out.dtype == slot.dtype:
        head = out.numel() - out.numel() // 16
        slot.view(-1)[:head].copy_(out.reshape(-1)[:head])
    if MODE != "combine" or _state.pop("before_combine", None) is not None:
        signal()  # (combine mode on a one-kernel plan: before the loop's copy, as in copy mode)
    return out
