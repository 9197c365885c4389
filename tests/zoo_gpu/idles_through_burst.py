"""Tries: a lower --energy figure. The answers and the timed calls are honest (the bundled
triton_bf16 kernel, loaded from submissions/), but the worker's timer is patched so that its
--energy burst (harness/worker/timer.py, `CallTimer._burst`) runs no kernel: it returns the last
call's output (the burst repeats that call's inputs), lets the GPU idle for the burst's time, and
reports as many calls as would each take 30% of the time between two of its ordinary calls, just
above the parent's floor (a quarter of the ranked median).
Must get: under --energy every benchmark case passes with the same ranked numbers as triton_bf16 and
no energy figure, its note "not measured: the burst drew N W, the idle GPU M W" (the burst drew no
more than 1.1 times the idle GPU: harness/parent/energy.py). Without --energy: exactly triton_bf16.
From a red-team pass on the burst; not yet run on a GPU."""
import importlib.util
import time
from pathlib import Path

from harness.worker import timer

_spec = importlib.util.spec_from_file_location(
    "bundled_bf16", Path(__file__).resolve().parents[2] / "submissions" / "triton_bf16.py")
_bundled = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_bundled)

_last: dict = {}
_gaps: list = []  # seconds between the starts of two calls: at least a call's ranked time


def custom_kernel(data):
    now = time.perf_counter()
    if "t" in _last:
        _gaps.append(now - _last["t"])
    _last["t"] = now
    _last["out"] = _bundled.custom_kernel(data)
    return _last["out"]


def _idle_burst(self, fn, data, seconds):
    time.sleep(seconds)
    calls = max(1, int(seconds / (0.3 * min(_gaps[-8:], default=seconds))))
    return _last["out"], {"device_s": seconds / calls, "host_s": 0.0, "tail_s": 0.0, "caught_up": False,
                          "replaced": [], "calls": calls}


timer.CallTimer._burst = _idle_burst
