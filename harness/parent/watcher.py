"""Proof, once per timed call, that the worker's DONE came after its output was final.

The parent's fence (harness/parent/fence.py) ends a call's interval where its own stream, waiting on
DONE, takes a snapshot of the slot. Between the worker's DONE and that snapshot lies the stream's
wake-up, a cost every reading has and the null calls subtract. A worker that wrote DONE before its
last step (the output's copy into the slot, a kernel on another stream) would hide that step in the
wake-up and pass, since the snapshot comes after it.

The watcher closes that. The parent launches it on a stream of its own after the census (which proved
every SM free) and waits until it is on an SM before it starts the clock and opens GATE: one warp that
polls DONE from an SM, and the moment DONE reaches the call's number reads SAMPLES words of the slot
at offsets hashed from a secret drawn for that call, and keeps each offset and value. After the call
the parent compares them with its snapshot: a word that changed between DONE and the snapshot was
written after DONE, and the call is rejected. The watcher only observes: the parent's stream does not
wait for its end, so it is in no interval, a null call's or a real one's. The parent fills the slot
with 0xFF bytes (a bf16 NaN, never a correct answer) before each call, so a late write always changes
what it writes over. A worker that leaves a fraction f of its output for after DONE escapes one call
with probability (1 - f) ** SAMPLES (below 3e-6 for a tenth of it); what it could still hide is a
step that ends within the watcher's own read after seeing DONE (one L2 round trip).

The kernel is PTX loaded through the CUDA driver (no compiler needed); NVIDIA only.
"""

from __future__ import annotations

import ctypes
import secrets

import torch

from harness.worker.shared_memory import SharedMemoryError, driver_call

LANES = 32
PER_LANE = 4
SAMPLES = LANES * PER_LANE
_HEAD = 4  # out's first words: [0] 1 DONE seen / 2 the bound passed first, [2..3] the ns it polled (u64)


def _sample(j: int) -> str:
    """PTX for lane sample j: its index i = lane * PER_LANE + j hashed with the seed (lowbias32) into
    an offset in [0, nwords), the word loaded there (GPU scope: from L2, after the acquire fence)."""
    return f"""
    mad.lo.u32      %i{j}, %lane, {PER_LANE}, {j};
    mul.lo.u32      %x{j}, %i{j}, 0x9E3779B9;
    xor.b32         %x{j}, %x{j}, %seed;
    shr.u32         %t{j}, %x{j}, 16;
    xor.b32         %x{j}, %x{j}, %t{j};
    mul.lo.u32      %x{j}, %x{j}, 0x7FEB352D;
    shr.u32         %t{j}, %x{j}, 15;
    xor.b32         %x{j}, %x{j}, %t{j};
    mul.lo.u32      %x{j}, %x{j}, 0x846CA68B;
    shr.u32         %t{j}, %x{j}, 16;
    xor.b32         %x{j}, %x{j}, %t{j};
    mul.hi.u32      %o{j}, %x{j}, %nwords;
    mul.wide.u32    %a{j}, %o{j}, 4;
    add.u64         %a{j}, %a{j}, %slot;
    ld.relaxed.gpu.global.u32 %v{j}, [%a{j}];"""


def _keep(j: int) -> str:
    """PTX storing lane sample j's offset at out[_HEAD + i] and its value at out[_HEAD + SAMPLES + i]."""
    return f"""
    mul.wide.u32    %b{j}, %i{j}, 4;
    add.u64         %b{j}, %b{j}, %out;
    st.global.u32   [%b{j}+{4 * _HEAD}], %o{j};
    st.global.u32   [%b{j}+{4 * (_HEAD + SAMPLES)}], %v{j};"""


def _regs(kind: str, names: str) -> str:
    return "\n".join(f"    .reg .{kind} %{n}{j};" for n in names for j in range(PER_LANE))


# Lane 0 first writes seq to `started` (the parent's stream waits for it before GATE, so the watcher
# is on an SM before any of the call's kernels can be). Then every lane polls DONE (the same word: one
# L2 request a round; relaxed loads, so no round invalidates the SM's L1 under a worker's kernel) until
# it reaches seq, as the stream wait's GEQ compares, or until limit_ns passes; then one acquire fence,
# and the samples, all loads issued before any store.
_PTX = f"""
.version 7.0
.target sm_70
.address_size 64

.visible .entry watch_done(.param .u64 flag, .param .u32 seq, .param .u64 slot, .param .u32 nwords,
                           .param .u32 seed, .param .u64 limit_ns, .param .u64 out, .param .u64 started)
{{
    .reg .pred  %p<4>;
    .reg .b32   %r<8>;
    .reg .b64   %rd<8>;
    .reg .b32   %lane;
    .reg .b32   %seed;
    .reg .b32   %nwords;
    .reg .b64   %slot;
    .reg .b64   %out;
{_regs("b32", "ixtov")}
{_regs("b64", "ab")}

    ld.param.u64    %rd1, [flag];
    ld.param.u32    %r1, [seq];
    ld.param.u64    %slot, [slot];
    ld.param.u32    %nwords, [nwords];
    ld.param.u32    %seed, [seed];
    ld.param.u64    %rd2, [limit_ns];
    ld.param.u64    %out, [out];
    ld.param.u64    %rd7, [started];
    mov.u32         %lane, %tid.x;
    mov.u32         %r5, 2;
    setp.ne.u32     %p3, %lane, 0;
    @%p3 bra        ARMED;
    st.release.sys.global.u32 [%rd7], %r1;
ARMED:
    mov.u64         %rd3, %globaltimer;
POLL:
    ld.relaxed.gpu.global.u32 %r2, [%rd1];
    sub.s32         %r3, %r2, %r1;
    setp.ge.s32     %p1, %r3, 0;
    @%p1 bra        SEEN;
    mov.u64         %rd4, %globaltimer;
    sub.u64         %rd5, %rd4, %rd3;
    setp.lt.u64     %p2, %rd5, %rd2;
    @%p2 bra        POLL;
    bra             HEAD;
SEEN:
    fence.acq_rel.gpu;
    mov.u32         %r5, 1;
    mov.u64         %rd4, %globaltimer;
{"".join(_sample(j) for j in range(PER_LANE))}
{"".join(_keep(j) for j in range(PER_LANE))}
HEAD:
    setp.ne.u32     %p3, %lane, 0;
    @%p3 bra        END;
    sub.u64         %rd6, %rd4, %rd3;
    st.global.u32   [%out], %r5;
    st.global.u64   [%out+8], %rd6;
END:
    ret;
}}
""".encode()


class DoneWatcher:
    """The watcher kernel, ready to launch on a stream of the parent's (harness/parent/fence.py,
    `Fence._watch`); `changed(snapshot)` after the call says how many sampled words changed after DONE."""

    def __init__(self):
        if torch.version.hip:
            raise SharedMemoryError("the DONE watcher is NVIDIA PTX")
        torch.empty(1, device="cuda")  # the primary context is current from here on
        self._module, self._function = ctypes.c_void_p(), ctypes.c_void_p()
        driver_call("ModuleLoadData", ctypes.byref(self._module), ctypes.c_char_p(_PTX))
        driver_call("ModuleGetFunction", ctypes.byref(self._function), self._module, b"watch_done")
        self.out = torch.zeros(_HEAD + 2 * SAMPLES, dtype=torch.int32, device="cuda")
        self.seed, self.armed = 0, False

    def launch(self, stream: "torch.cuda.Stream", flag_address: int, seq: int, slot: torch.Tensor,
               limit_s: float, started_address: int) -> None:
        """Enqueue the watcher of call `seq` on `stream`: once on an SM it writes `seq` to the 32-bit word
        at `started_address`, waits for the 32-bit flag at `flag_address` to reach `seq` (at most
        `limit_s`), then samples `slot`'s whole 32-bit words (of a slot of 16 GiB or more, its first
        2**32 - 1). A slot under 4 bytes is not watched (nothing is launched, nothing written)."""
        nwords = min(slot.numel() * slot.element_size() // 4, 0xFFFFFFFF)
        self.armed = nwords > 0
        if not self.armed:
            return
        self.seed = secrets.randbits(32)
        values = (ctypes.c_uint64(flag_address), ctypes.c_uint32(seq & 0xFFFFFFFF), ctypes.c_uint64(slot.data_ptr()),
                  ctypes.c_uint32(nwords), ctypes.c_uint32(self.seed), ctypes.c_uint64(max(1, int(limit_s * 1e9))),
                  ctypes.c_uint64(self.out.data_ptr()), ctypes.c_uint64(started_address))
        params = (ctypes.c_void_p * len(values))(*(ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in values))
        driver_call("LaunchKernel", self._function, 1, 1, 1, LANES, 1, 1, 0, ctypes.c_void_p(stream.cuda_stream),
                    params, None)

    def changed(self, snapshot: torch.Tensor) -> tuple[bool, int]:
        """(whether the watcher saw DONE within its bound, how many of its sampled words differ in
        `snapshot`, the parent's copy of the slot taken after DONE) for the last call, once the
        stream that ran it has passed it."""
        return compare(self.out, snapshot) if self.armed else (False, 0)


def watch_problem(seen: bool, changed: int) -> str:
    """What the parent tells of a watched call whose watcher saw DONE (`seen`) and `changed` sampled
    words change after it (`DoneWatcher.changed`), or "" when it passed."""
    if changed:
        return (f"the call signalled its end (DONE) before its output was final: {changed} of {SAMPLES} words of the "
                "output sampled when it did changed afterwards (nothing may write the output after DONE)")
    if not seen:
        return ("the parent's watcher did not see the call's DONE, which its stream did see: DONE was taken back (it "
                "may only be written once, at the end), or the call could not start beside the watcher's one warp "
                "(a launch that needs every SM)")
    return ""


def compare(out: torch.Tensor, snapshot: torch.Tensor) -> tuple[bool, int]:
    """What the watcher's record `out` says against `snapshot` (see `DoneWatcher.changed`)."""
    if int(out[0].item()) != 1:  # (its offsets are then another call's, perhaps past this slot's end)
        return False, 0
    raw = snapshot.reshape(-1).view(torch.uint8)
    words = raw[: raw.numel() // 4 * 4].view(torch.int32)
    offsets = out[_HEAD:_HEAD + SAMPLES].long()
    return True, int((words[offsets] != out[_HEAD + SAMPLES:]).sum().item())


def offsets(seed: int, nwords: int) -> list[int]:
    """The offsets (in 32-bit words) the kernel samples for `seed` in a slot of `nwords` words, in the
    order it stores them: its hash written out in Python (tests check the two agree)."""
    result = []
    for i in range(SAMPLES):
        x = ((i * 0x9E3779B9) & 0xFFFFFFFF) ^ seed
        x ^= x >> 16
        x = (x * 0x7FEB352D) & 0xFFFFFFFF
        x ^= x >> 15
        x = (x * 0x846CA68B) & 0xFFFFFFFF
        x ^= x >> 16
        result.append((x * nwords) >> 32)
    return result
