"""Tries: tell a watched call from a timed one inside the call, and end early only when no watcher
is there (class (e) of issue 37: behave differently when observed). The fence's DONE watcher
(harness/parent/watcher.py) runs only in watched calls, one warp held on an SM from before the call's
first kernel until DONE. Here, in fenced calls, triton_bf16's output is copied into the slot by a
kernel of this file's own, launched as one exact wave: 2 programs of 1,024 threads per SM, so every
SM's 2,048 threads are taken and a program cannot be placed beside the watcher's warp. Each program
counts itself in; program 0 waits a few rounds for the count to reach the grid. Reached, every
program was placed at once, so no watcher is there, and it writes DONE := seq at once, before the
copy is done (the copy then overlaps the parent's wake-up, as signals_done_early's does). Not
reached, it leaves DONE to the loop, after the copy. The file returns the slot itself, so the loop's
own copy does nothing (as writes_into_slot does).
Must get: fenced, never a pass faster than triton_bf16 in the same run (docs/threat-model.md,
"Still open" (3)). With the watcher on and only watched calls it is expected to pass faster: the
count tells the two kinds of call apart (an open hole, not yet measured). Unfenced, and on the
CPU: exactly triton_bf16."""
import importlib.util
import os
from pathlib import Path

import torch
import triton
import triton.language as tl

_spec = importlib.util.spec_from_file_location(
    "bundled_bf16", Path(__file__).resolve().parents[2] / "submissions" / "triton_bf16.py")
_bundled = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_bundled)

WARPS = 32    # 1,024 threads a program: two fill an SM's 2,048
PER_SM = 2
SPIN = 16     # rounds program 0 waits for the others to count in
TILE = 2048
_state: dict = {"rounds": 0}


@triton.jit(do_not_specialize=["n", "chunk", "base", "seq"])
def _copy_detect(src, dst, n, chunk, counter, done, base, seq, SPIN: tl.constexpr, TILE: tl.constexpr):
    """Copy src[:n] to dst in chunks, one per program; program 0 writes DONE := seq first when every
    program counted in (the count is cumulative: this launch's programs start at `base`)."""
    pid = tl.program_id(0)
    seen = tl.atomic_add(counter, 1, sem="relaxed", scope="gpu") + 1 - base
    if pid == 0:
        rounds = 0
        while (seen < tl.num_programs(0)) & (rounds < SPIN):
            seen = tl.atomic_add(counter, 0, sem="relaxed", scope="gpu") - base
            rounds += 1
        if seen >= tl.num_programs(0):
            tl.atomic_xchg(done, seq, sem="relaxed", scope="sys")
    start = pid * chunk
    for off in range(0, chunk, TILE):
        idx = start + off + tl.arange(0, TILE)
        mask = (idx < start + chunk) & (idx < n)
        tl.store(dst + idx, tl.load(src + idx, mask=mask), mask=mask)


def _install():
    from harness.worker import loop

    original = loop._fenced_call

    def patched(call, data, slot, timer, flags, seq):
        _state["fence"] = (flags, seq, slot)
        try:
            return original(call, data, slot, timer, flags, seq)
        finally:
            _state.pop("fence", None)

    loop._fenced_call = patched  # main() looks the name up at every call


def _launch(src, dst, done, seq):
    grid = PER_SM * torch.cuda.get_device_properties(0).multi_processor_count
    n = src.numel()
    chunk = (n + grid - 1) // grid
    base = _state["rounds"] * grid
    _copy_detect[(grid,)](src, dst, n, chunk, _state["counter"], done, base, seq, SPIN=SPIN, TILE=TILE,
                          num_warps=WARPS)
    _state["rounds"] += 1


if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1":
    _install()
    _state["counter"] = torch.zeros(1, dtype=torch.int32, device="cuda")
    # compiled and loaded now: a first launch behind GATE would wait for an idle GPU
    _scratch = torch.zeros(TILE, dtype=torch.bfloat16, device="cuda")
    _launch(_scratch, torch.empty_like(_scratch), torch.zeros(8, dtype=torch.int32, device="cuda")[1:], 0)
    torch.cuda.synchronize()


def custom_kernel(data):
    fence = _state.get("fence")
    out = _bundled.custom_kernel(data)
    if fence is None:  # unfenced (warm-ups, tests, the CPU): triton_bf16 as it is
        return out
    flags, seq, slot = fence
    if out.shape != slot.shape or out.dtype != slot.dtype or not slot.is_contiguous():
        return out
    from harness.worker.shared_memory import DONE

    _launch(out.reshape(-1), slot.view(-1), flags.buffer.bytes_tensor()[DONE:DONE + 4].view(torch.int32), seq)
    return slot  # the loop's slot.copy_(slot) does nothing
