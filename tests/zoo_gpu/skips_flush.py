"""Tries: time every call with a warm L2. The answers are honest (the bundled triton_bf16 kernel,
loaded from submissions/), but the worker's timer (harness/worker/timer.py) is patched so that it
no longer flushes L2 before a timed call: the parent's refill of the inputs, just before, leaves them
in L2 where they fit (the 4×1k cache is 4.5 MiB of a 60 MiB L2). The GPU is still kept busy while
the call's launches are queued (a spin kernel, which touches no memory), as the timer's own busy
writes would: BENCHMARKS.md (session 4, no-flush against rotated inputs, launches hidden) measured
this warm L2 at 14–16% faster at 4×1k and at most 3% elsewhere.
Must get: rejected by the profiler's audit on the 4×1k benchmark case: "timed median ... is below
the profiler's ... µs of GPU work per call" (Nsight Compute flushes L2 before each kernel); the
gains under the audit's 10% tolerance at larger shapes are out of its reach (docs/threat-model.md).
Added in session 15; not yet run on the H200."""
import importlib.util
from pathlib import Path

import torch

from harness.worker import timer

_spec = importlib.util.spec_from_file_location(
    "bundled_bf16", Path(__file__).resolve().parents[2] / "submissions" / "triton_bf16.py")
_bundled = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_bundled)


def _no_flush(self):
    """The timer's prepare without its eviction: wait for the refill, then spin the GPU for as long
    as the timer's busy writes would last (its host-time estimate, at ~2 GHz), touching no memory."""
    self._sync()
    torch.cuda._sleep(int(2e9 * max(self.busy_seconds(), 50e-6)))


timer.CallTimer.prepare = _no_flush


def custom_kernel(data):
    return _bundled.custom_kernel(data)
