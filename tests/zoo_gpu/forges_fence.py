"""Tries: signal the end of the call (the fence's DONE flag) the moment the parent opens the gate,
before any of the call's work, so the parent's clock would close at once; the work itself is honest
(the bundled triton_bf16 kernel; GPU only).
Must get: rejected: the parent judges the snapshot its own stream took when DONE arrived, which holds
no answer yet ("timed call 1: ..."). Unfenced runs do not use the flags: it passes there, honestly."""
import importlib.util
from pathlib import Path

from harness.worker.shared_memory import DONE, GATE, call_stream
from harness.worker import loop

_spec = importlib.util.spec_from_file_location(
    "bundled_bf16", Path(__file__).resolve().parents[2] / "submissions" / "triton_bf16.py")
_bundled = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_bundled)
_fenced = loop._fenced_call


def _early(call, data, slot, timer, flags, seq):
    stream = call_stream()  # (the stream the worker's own side of the call runs on)
    flags.wait(stream, GATE, seq)
    flags.write(stream, DONE, seq)
    return _fenced(call, data, slot, timer, flags, seq)


loop._fenced_call = _early


def custom_kernel(data):
    return _bundled.custom_kernel(data)
