"""Tries: a fatal GPU fault during a timed call. On its first fenced call (harness/worker/loop.py's
`_fenced_call`, patched) a side stream of the worker waits for the fence's GATE flag (the front end
waits: nothing runs before the parent's clock) and then runs a one-program Triton kernel that stores
through a wild pointer (address 8): an illegal-address fault in the worker's context while the parent's
stream waits for DONE. Under MPS such a fault is, by NVIDIA's documentation, reported to every client
of the GPU, the parent included (docs/threat-model.md, "Still open", (2)). The call itself is honest (the bundled
triton_bf16 kernel); the kernel is compiled and loaded at import, with its store masked off (a first
launch behind the gate could wait for the parent, which waits for it).
Must get: fails with a one-line reason; the files after it in the same run still pass and rank (what MPS
does to the parent and to later workers is measured on the H200). Unfenced (and on the CPU): passes,
honestly."""
import importlib.util
import os
from pathlib import Path

import torch
import triton
import triton.language as tl

from harness.worker.shared_memory import GATE
from harness.worker import loop

_spec = importlib.util.spec_from_file_location(
    "bundled_bf16", Path(__file__).resolve().parents[2] / "submissions" / "triton_bf16.py")
_bundled = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_bundled)
_fenced = loop._fenced_call
WILD_ADDRESS = 8


@triton.jit(do_not_specialize=["offset", "enable"])
def _poke(ptr, offset, enable):
    tl.store(ptr + offset, 1, mask=enable != 0)


_state = {}


def _faulting(call, data, slot, timer, flags, seq):
    if not _state.get("fired"):
        _state["fired"] = True
        side = _state["side"]
        flags.wait(side, GATE, seq)  # after the gate: the fault lands while the parent waits for DONE
        with torch.cuda.stream(side):
            _poke[(1,)](_state["scratch"], _state["offset"], 1)
        print(f"zoo: call {seq}: a store to address {WILD_ADDRESS} queued behind the gate", flush=True)
    return _fenced(call, data, slot, timer, flags, seq)


if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1":
    scratch = torch.zeros(4, dtype=torch.int32, device="cuda")
    _state.update(scratch=scratch, offset=(WILD_ADDRESS - scratch.data_ptr()) // scratch.element_size())
    _poke[(1,)](scratch, _state["offset"], 0)  # the same types and specialization, the store masked off
    torch.cuda.synchronize()
    _state["side"] = torch.cuda.Stream()
    loop._fenced_call = _faulting


def custom_kernel(data):
    return _bundled.custom_kernel(data)
