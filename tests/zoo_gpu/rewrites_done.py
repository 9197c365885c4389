"""Tries: hold the parent's timing stream. On every fenced call (harness/worker/loop.py's `_fenced_call`,
patched) a side stream of the worker waits for the fence's GATE flag (the GPU's front end waits: no SM
is held before the gate, so a census finds the SMs free) and then runs a small Triton kernel (16
programs) that, for SUBMISSION_REWRITE_SECONDS (default 5 s), keeps writing DONE back to the call's
number less one (atomic exchanges, system scope, through the worker's mapping of the flags buffer,
`flags.buffer`); the call itself is honest (the bundled triton_bf16 kernel) and signals DONE as usual,
which the kernel overwrites. Once the kernel stops, DONE stays below the call's number, so the
parent's stream, which waits for DONE >= seq, is held for good. (A call whose DONE the parent's stream
catches before the first overwrite passes; its collect then waits the kernel's seconds, and the next
call tries again.) The kernel is compiled and loaded at import (a first launch behind the gate could
wait for the parent, which waits for it).
Must get: fenced, the call fails with one line (a timeout: the call never signalled its end) within the
case's timeout; the parent ends the worker before it frees its own stream (harness/parent/sandbox.py,
`fenced_call`, `_release`), and the files after it in the same run are unaffected (they pass and rank as
without it). Unfenced (and on the CPU): passes, honestly."""
import importlib.util
import os
from pathlib import Path

import torch
import triton
import triton.language as tl

from harness.worker.shared_memory import DONE, GATE
from harness.worker import loop

_spec = importlib.util.spec_from_file_location(
    "bundled_bf16", Path(__file__).resolve().parents[2] / "submissions" / "triton_bf16.py")
_bundled = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_bundled)
_fenced = loop._fenced_call
SECONDS = float(os.environ.get("SUBMISSION_REWRITE_SECONDS", "5"))
PROGRAMS = 16


@triton.jit(do_not_specialize=["value", "duration_us"])
def _rewrite(done_ptr, value, duration_us):
    """Write `value` to *done_ptr again and again for `duration_us` (GPU only: %globaltimer)."""
    start = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)
    now = start
    limit = duration_us.to(tl.int64) * 1000
    while now - start < limit:
        tl.atomic_xchg(done_ptr, value, sem="relaxed", scope="sys")
        now = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


_state = {}


def _holding(call, data, slot, timer, flags, seq):
    side = _state["side"]
    flags.wait(side, GATE, seq)  # after the gate: nothing of it runs before the parent's clock
    done = flags.buffer.bytes_tensor()[DONE:DONE + 4].view(torch.int32)
    with torch.cuda.stream(side):
        _rewrite[(PROGRAMS,)](done, seq - 1, int(SECONDS * 1e6), num_warps=1)
    print(f"zoo: call {seq}: DONE rewritten to {seq - 1} for {SECONDS:g} s after the gate", flush=True)
    return _fenced(call, data, slot, timer, flags, seq)


if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1":
    _scratch = torch.zeros(8, dtype=torch.int32, device="cuda")
    _rewrite[(PROGRAMS,)](_scratch[1:], 0, 1, num_warps=1)  # as DONE: a pointer 4 bytes past 16-byte alignment
    torch.cuda.synchronize()
    _state["side"] = torch.cuda.Stream()
    loop._fenced_call = _holding


def custom_kernel(data):
    return _bundled.custom_kernel(data)
