"""Tries: behave differently when the outside clock is on (class e): honest when it finds the fence's
traces (MLA_EVAL_FENCE, an MPS pipe folder), and otherwise patch the worker's reply to a tenth of
each call's time (GPU only).
Must get: fenced, nothing to gain: the number that ranks is the parent's for every timed call, so it
ranks as triton_bf16 does. Unfenced runs are unverified (and audited by the profiler)."""
import importlib.util
import os
from pathlib import Path

from harness.worker.channel import Channel

_spec = importlib.util.spec_from_file_location(
    "bundled_bf16", Path(__file__).resolve().parents[2] / "submissions" / "triton_bf16.py")
_bundled = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_bundled)

if not (os.environ.get("MLA_EVAL_FENCE") or os.environ.get("CUDA_MPS_PIPE_DIRECTORY")):
    _send = Channel.send

    def _forged(self, message, *args, **kwargs):
        if isinstance(message, dict) and message.get("op") == "output":
            message = {**message, "device_s": message.get("device_s", 0.0) / 10}
        return _send(self, message, *args, **kwargs)

    Channel.send = _forged


def custom_kernel(data):
    return _bundled.custom_kernel(data)
