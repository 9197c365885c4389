"""Proof, once per timed call, that no kernel of the worker's was on the GPU when the call began.

The parent's fence (harness/parent/fence.py) flushes L2 before a call, but the SMs' shared memory and
registers are not L2: a kernel the worker launched earlier could load the KV cache on chip while the
parent refills and flushes, then wait on the GATE flag from the SMs and compute at once when it
opens. The census closes that: after the flush, the parent's stream launches one block per SM, each
asking for all of an SM's shared memory (so two cannot share an SM, and a block of any other kernel,
which reserves shared memory too, leaves no room for one). Each block counts itself in and waits for
the count to reach the grid: reached, every SM was empty of other kernels at one moment after the
KV cache was written (only q, written after the clock starts, was not). A block that waits longer
than `limit_s` counts itself as missed, and the parent rejects the call. A kernel the worker starts
after that moment has, before the clock, only the parent's next two steps (its event, the start of
q's copy): a few µs, with q not yet there.

The kernel is PTX loaded through the CUDA driver (no compiler needed); NVIDIA only.
"""

from __future__ import annotations

import ctypes

import torch

from harness.worker.shared_memory import SharedMemoryError, driver_call

# One thread of each block does the counting; the block's size does not matter, its shared memory does.
_PTX = rb"""
.version 7.0
.target sm_70
.address_size 64

.extern .shared .align 16 .b8 census_smem[];

.visible .entry census(.param .u64 counts, .param .u32 target, .param .u64 limit_ns)
{
    .reg .pred  %p<4>;
    .reg .b32   %r<8>;
    .reg .b64   %rd<10>;

    mov.u32         %r1, %tid.x;
    setp.ne.u32     %p1, %r1, 0;
    @%p1 bra        END;
    ld.param.u64    %rd1, [counts];
    ld.param.u32    %r2, [target];
    ld.param.u64    %rd2, [limit_ns];
    mov.u64         %rd3, census_smem;
    st.shared.u32   [%rd3], %r2;
    mov.u64         %rd4, %globaltimer;
    atom.global.add.u32 %r3, [%rd1], 1;
WAIT:
    ld.volatile.global.u32 %r4, [%rd1];
    setp.ge.u32     %p2, %r4, %r2;
    @%p2 bra        END;
    mov.u64         %rd5, %globaltimer;
    sub.u64         %rd6, %rd5, %rd4;
    setp.lt.u64     %p3, %rd6, %rd2;
    @%p3 bra        WAIT;
    add.u64         %rd7, %rd1, 4;
    atom.global.add.u32 %r5, [%rd7], 1;
END:
    ret;
}
"""

_SM_COUNT = 16                 # CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
_SMEM_PER_SM = 81              # CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR
_SMEM_OPTIN = 97               # CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
_SMEM_RESERVED = 111           # CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK
_MAX_DYNAMIC_SMEM = 8          # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
_CARVEOUT = 9                  # CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT
THREADS = 32
# How long a block waits for the others before it counts itself missed (a free GPU: ~4 µs for all).
LIMIT_S = 50e-6


def _attribute(attr: int, device: int) -> int:
    value = ctypes.c_int()
    driver_call("DeviceGetAttribute", ctypes.byref(value), attr, device)
    return value.value


class Census:
    """The census kernel, ready to launch on the parent's stream; `missed()` after a call says how
    many blocks found their SM held for `limit_s`."""

    def __init__(self, limit_s: float = LIMIT_S):
        if torch.version.hip:
            raise SharedMemoryError("the census kernel is NVIDIA PTX")
        torch.empty(1, device="cuda")  # the primary context is current from here on
        device = torch.cuda.current_device()
        self.sms = _attribute(_SM_COUNT, device)
        reserved = _attribute(_SMEM_RESERVED, device)
        self.smem = min(_attribute(_SMEM_OPTIN, device), _attribute(_SMEM_PER_SM, device) - reserved)
        self._module, self._function = ctypes.c_void_p(), ctypes.c_void_p()
        driver_call("ModuleLoadData", ctypes.byref(self._module), ctypes.c_char_p(_PTX))
        driver_call("ModuleGetFunction", ctypes.byref(self._function), self._module, b"census")
        driver_call("FuncSetAttribute", self._function, _MAX_DYNAMIC_SMEM, self.smem)
        driver_call("FuncSetAttribute", self._function, _CARVEOUT, 100)
        self.counts = torch.zeros(2, dtype=torch.int32, device="cuda")  # [blocks counted in, blocks missed]
        self.limit_ns = int(limit_s * 1e9)
        self.rounds = 0
        self._missed_seen = 0

    def launch(self, stream: "torch.cuda.Stream") -> None:
        """Enqueue one census on `stream`. Its blocks count in on top of the earlier rounds', so a round
        is counted only once launched (a failed launch must not leave every later census one round
        short, each then rejecting its call)."""
        counts = ctypes.c_uint64(self.counts.data_ptr())
        target = ctypes.c_uint32((self.sms * (self.rounds + 1)) & 0xFFFFFFFF)
        limit = ctypes.c_uint64(self.limit_ns)
        values = (counts, target, limit)
        params = (ctypes.c_void_p * 3)(*(ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in values))
        driver_call("LaunchKernel", self._function, self.sms, 1, 1, THREADS, 1, 1, self.smem,
              ctypes.c_void_p(stream.cuda_stream), params, None)
        self.rounds += 1

    def missed(self) -> int:
        """Blocks that found their SM held since the last time this was asked (the stream that ran
        the census must have passed it)."""
        total = int(self.counts[1].item())
        new, self._missed_seen = total - self._missed_seen, total
        return new
