"""Tries: start each call's work before the clock: a thread polls the first input (q) in the shared
buffers on a stream of its own and, the moment the parent's refill changes it, computes the answer
there; the call only waits for that answer (the bundled triton_bf16 kernel; GPU only).
Must get: no gain. Fenced, q is written after the parent's clock starts, so the work that needs it
runs inside the timed interval: it ranks no faster than triton_bf16 (within the run-to-run noise)."""
import importlib.util
import threading
import time
from pathlib import Path

import torch

_spec = importlib.util.spec_from_file_location(
    "bundled_bf16", Path(__file__).resolve().parents[2] / "submissions" / "triton_bf16.py")
_bundled = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_bundled)
_state = {"data": None, "seen": None, "answer": None, "fresh": threading.Event(), "thread": None}


def _watch():
    stream = torch.cuda.Stream()
    while True:
        data = _state["data"]
        with torch.cuda.stream(stream):
            mark = data[0].reshape(-1)[:16].float().cpu()  # waits on this stream only
            if _state["seen"] is not None and torch.equal(mark, _state["seen"]):
                time.sleep(2e-5)
                continue
            out = _bundled.custom_kernel(data)
            done = torch.cuda.Event()
            done.record(stream)
        _state.update(seen=mark, answer=(data, out, done))
        _state["fresh"].set()


def custom_kernel(data):
    if _state["data"] is not data:  # a new case: its own buffers
        _state.update(data=data, seen=None)
        _state["fresh"].clear()
    if _state["thread"] is None:
        _state["thread"] = threading.Thread(target=_watch, daemon=True)
        _state["thread"].start()
    if _state["fresh"].wait(0.05):  # the watcher saw new inputs (fenced: only once the clock runs)
        _state["fresh"].clear()
        seen, out, done = _state["answer"]
        if seen is data:
            torch.cuda.current_stream().wait_event(done)
            return out
    return _bundled.custom_kernel(data)  # warm-up calls reuse their inputs: nothing new to see
