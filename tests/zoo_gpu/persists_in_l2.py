"""Tries: keep the KV cache in L2 from one call to the next, past the timer's flush. The answers are
honest (the bundled triton_bf16 kernel, loaded from submissions/), but its kernels run on a stream
whose access-policy window marks the cache's lines persisting, with the device's persisting carve-out
set to its maximum, hoping the flush's ordinary writes cannot evict persisting lines while the
parent refills the next call's inputs in place, at the same addresses (GPU only; NVIDIA sm_80 and
later).
Must get: without effect. It passes (its answers are right), and no case's timed median is below the
bundled bf16 kernel's median for that case over the same session's fresh seeds: the timer returns every
persisting line to normal before its flush (harness/worker/timer.py), and the flush writes twice the
L2 size; the audit's profiler flushes all of L2 before each kernel. lab/l2_persist_check.py times it
against the honest kernel with and without the timer's reset. Its log says what the driver granted."""
import ctypes
import importlib.util
from pathlib import Path

import torch

_spec = importlib.util.spec_from_file_location(
    "bundled_bf16", Path(__file__).resolve().parents[2] / "submissions" / "triton_bf16.py")
_bundled = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_bundled)

LIMIT_PERSISTING_L2 = 0x06             # CU_LIMIT_PERSISTING_L2_CACHE_SIZE
ATTR_MAX_PERSISTING_L2 = 108           # CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE
ATTR_MAX_WINDOW = 109                  # CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE
STREAM_ATTR_WINDOW = 1                 # CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW
NORMAL, STREAMING, PERSISTING = 0, 1, 2


class _Window(ctypes.Structure):
    _fields_ = [("base_ptr", ctypes.c_void_p), ("num_bytes", ctypes.c_size_t), ("hit_ratio", ctypes.c_float),
                ("hit_prop", ctypes.c_int), ("miss_prop", ctypes.c_int)]


class _StreamAttr(ctypes.Union):   # CUstreamAttrValue: a 64-byte union, the window first
    _fields_ = [("window", _Window), ("pad", ctypes.c_char * 64)]


_state = {}


def _setup(device):
    torch.zeros(1, device=device)   # the primary context exists and is current on this thread
    cuda = ctypes.CDLL("libcuda.so.1")
    persisting, window = ctypes.c_int(), ctypes.c_int()
    cuda.cuDeviceGetAttribute(ctypes.byref(persisting), ATTR_MAX_PERSISTING_L2, device.index or 0)
    cuda.cuDeviceGetAttribute(ctypes.byref(window), ATTR_MAX_WINDOW, device.index or 0)
    rc = cuda.cuCtxSetLimit(LIMIT_PERSISTING_L2, ctypes.c_size_t(persisting.value))
    granted = ctypes.c_size_t()
    cuda.cuCtxGetLimit(ctypes.byref(granted), LIMIT_PERSISTING_L2)
    print(f"persists_in_l2: carve-out asked {persisting.value} B (rc {rc}), granted {granted.value} B; "
          f"largest window {window.value} B", flush=True)
    _state.update(cuda=cuda, carve=granted.value, window=window.value, stream=torch.cuda.Stream(device), base=None)


def _mark(kv):
    base, size = kv.data_ptr(), kv.numel() * kv.element_size()
    if _state["base"] == (base, size):
        return
    span = min(size, _state["window"])
    attr = _StreamAttr()
    attr.window = _Window(base, span, min(1.0, _state["carve"] / max(span, 1)), PERSISTING, STREAMING)
    rc = _state["cuda"].cuStreamSetAttribute(ctypes.c_void_p(_state["stream"].cuda_stream), STREAM_ATTR_WINDOW,
                                             ctypes.byref(attr))
    print(f"persists_in_l2: window of {span} B at {base:#x}, hit ratio {attr.window.hit_ratio:.2f} (rc {rc})",
          flush=True)
    _state["base"] = (base, size)


def custom_kernel(data):
    q, kv_data = data[0], data[1]
    if not q.is_cuda:
        return _bundled.custom_kernel(data)
    if not _state:
        _setup(q.device)
    _mark(kv_data["bf16"])
    caller, side = torch.cuda.current_stream(q.device), _state["stream"]
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        out = _bundled.custom_kernel(data)
    caller.wait_stream(side)   # ordered on the caller's stream: its events time the whole call
    return out
