"""The parent's wait for a fenced call's end: a kernel that watches DONE and samples the output.

A worker signals the end of a call by writing DONE (harness/parent/fence.py). What the parent's stream
does between that write and its closing event is part of the fence's cost, measured by null calls and
subtracted, so a worker that wrote DONE before its last kernel ended would have that kernel's tail
hidden in the subtracted time. The watcher bounds the gain to the watcher's own reaction time: one
block on the parent's stream, launched when the gate opens, spins on DONE (sleeping between reads)
and, the moment it sees it, copies SAMPLE words of the output slot, at positions the parent draws at
random per call in memory of its own, into a buffer of its own. The parent's snapshot of the whole
slot comes after; a sampled word that differs from the snapshot was written after DONE, and the call
is rejected. An honest worker writes DONE on the stream that wrote the output, after it.

The kernel is PTX loaded through the CUDA driver, as the census's is (harness/parent/census.py);
NVIDIA only.
"""

from __future__ import annotations

import ctypes

import torch

from harness.worker.shared_memory import SharedMemoryError, driver_call

SAMPLE = 64          # output words (4 bytes) sampled per call: one per thread, read together
SLEEP_NS = 100       # the spin's sleep between two reads of DONE (nanosleep: 0 to 2x this)

# Every thread spins on DONE (one read serves the warp), then reads its sampled word at once. The
# comparison is cyclic, as cuStreamWaitValue32's GEQ is: (int)(flag - seq) >= 0.
_PTX = rb"""
.version 7.0
.target sm_70
.address_size 64

.visible .entry watch_done(.param .u64 flag, .param .u32 seq, .param .u64 slot, .param .u64 positions,
                           .param .u64 sample, .param .u32 count, .param .u32 sleep_ns)
{
    .reg .pred  %p<4>;
    .reg .b32   %r<12>;
    .reg .b64   %rd<12>;

    ld.param.u64    %rd1, [flag];
    ld.param.u32    %r1, [seq];
    ld.param.u32    %r2, [sleep_ns];
    ld.param.u32    %r3, [count];
    mov.u32         %r4, %tid.x;
    setp.lt.u32     %p1, %r4, %r3;
    ld.param.u64    %rd2, [positions];
    mul.wide.u32    %rd3, %r4, 4;
    add.u64         %rd4, %rd2, %rd3;
    mov.u32         %r5, 0;
    @%p1 ld.global.u32 %r5, [%rd4];
POLL:
    ld.volatile.global.u32 %r6, [%rd1];
    sub.s32         %r7, %r6, %r1;
    setp.ge.s32     %p2, %r7, 0;
    @%p2 bra        SEEN;
    nanosleep.u32   %r2;
    bra             POLL;
SEEN:
    @!%p1 bra       END;
    ld.param.u64    %rd5, [slot];
    mul.wide.u32    %rd6, %r5, 4;
    add.u64         %rd7, %rd5, %rd6;
    ld.volatile.global.u32 %r8, [%rd7];
    ld.param.u64    %rd8, [sample];
    add.u64         %rd9, %rd8, %rd3;
    st.global.u32   [%rd9], %r8;
END:
    ret;
}
"""


class Watcher:
    """The watcher kernel and its per-call positions; `launch` before the call's DONE, `changed`
    once the parent's stream has taken its snapshot."""

    def __init__(self, sample: int = SAMPLE):
        if torch.version.hip:
            raise SharedMemoryError("the DONE watcher is NVIDIA PTX")
        torch.empty(1, device="cuda")  # the primary context is current from here on
        self.threads = max(1, sample)
        self._module, self._function = ctypes.c_void_p(), ctypes.c_void_p()
        driver_call("ModuleLoadData", ctypes.byref(self._module), ctypes.c_char_p(_PTX))
        driver_call("ModuleGetFunction", ctypes.byref(self._function), self._module, b"watch_done")
        self.positions = torch.zeros(sample, dtype=torch.int32, device="cuda")
        self.sample = torch.zeros(sample, dtype=torch.int32, device="cuda")
        self._generator = torch.Generator(device="cuda")
        self._generator.seed()  # (a seed of the parent's own: the worker cannot know the positions)
        self.count = 0

    def draw(self, slot: torch.Tensor, stream: "torch.cuda.Stream") -> None:
        """New positions in `slot`'s whole 4-byte words, drawn on `stream` (before the call's clock)."""
        words = slot.numel() * slot.element_size() // 4
        self.count = min(self.threads, words)
        if self.count:
            with torch.cuda.stream(stream):
                torch.randint(0, words, (self.threads,), generator=self._generator, out=self.positions)

    def launch(self, stream: "torch.cuda.Stream", flag_address: int, seq: int, slot: torch.Tensor) -> None:
        """Enqueue the watcher on `stream`: it ends once the flag at `flag_address` reaches `seq`, with
        the drawn words of `slot` copied into `sample`."""
        values = (ctypes.c_uint64(flag_address), ctypes.c_uint32(seq & 0xFFFFFFFF), ctypes.c_uint64(slot.data_ptr()),
                  ctypes.c_uint64(self.positions.data_ptr()), ctypes.c_uint64(self.sample.data_ptr()),
                  ctypes.c_uint32(self.count), ctypes.c_uint32(SLEEP_NS))
        params = (ctypes.c_void_p * len(values))(*(ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in values))
        driver_call("LaunchKernel", self._function, 1, 1, 1, self.threads, 1, 1, 0,
                    ctypes.c_void_p(stream.cuda_stream), params, None)

    def changed(self, snapshot: torch.Tensor) -> int:
        """How many sampled words the snapshot holds with another value than the watcher read at DONE
        (the stream that took both must have passed them)."""
        return changed_words(snapshot, self.positions[:self.count], self.sample[:self.count])


def changed_words(snapshot: torch.Tensor, positions: torch.Tensor, sample: torch.Tensor) -> int:
    """The words of `snapshot` (its bytes read as 4-byte words) at `positions` that differ from `sample`."""
    if not len(positions):
        return 0
    raw = snapshot.reshape(-1).view(torch.uint8)
    words = raw[: raw.numel() // 4 * 4].view(torch.int32)
    return int((words[positions.long()] != sample).sum().item())
