"""MLA decode attention (DeepSeek absorbed form) over an MXFP4 KV cache, in Triton.

The problem
-----------
Every query row carries 16 heads of 576 dims (512 "latent" + 64 "rope"). All 16 heads attend to one
shared KV head. Per sequence b (query rows qo_indptr[b]:qo_indptr[b+1], cache rows
kv_indptr[b]:kv_indptr[b+1]):

    out[q, h] = softmax(q[q, h] . K^T * sm_scale) @ K[:, :512]

Here the cache is OCP MXFP4: each row of 576 values is 288 bytes of 4-bit e2m1 codes, two per
byte (low nibble = even element, high nibble = odd element; codes 0..7 are
0, 0.5, 1, 1.5, 2, 3, 4, 6 and bit 3 is the sign), plus one e8m0 exponent per block of 32
elements (18 per row; value = 2**(e - 127)). The scale tensor may be padded in both dims, so it is
read through its own row stride. Only kv_data["mxfp4"] is read: about 306 bytes per cache row
instead of 1152 for bf16.

Why the kernel looks the way it does
------------------------------------
Decode attention reads the whole KV cache once and does little arithmetic per byte, so the aim is
to read every cache byte exactly once with the whole GPU busy, and to keep the decoding cheap:

* The 4-bit codes are decoded in registers, never into a bf16 copy in memory. On NVIDIA GPUs a
  few lines of PTX (`_E2M1_PTX`) decode two codes per 32-bit instruction: shifts and masks put a
  code's sign on bit 15 and its three magnitude bits on bits 6..8 of a bf16, which is exactly
  e2m1 * 2**-126 (code 1 is a bf16 subnormal, which bf16 fma keeps), then one packed fma by 2**126
  and one by the block scale 2**(e-127) give the bf16 operand: about 3.3 instructions per element
  instead of about 8 for the portable code (geomean 97.9 -> 89.2 us on the H200, BENCHMARKS.md
  session 5). The portable code (Triton's interpreter, AMD) builds fp16 e2m1 * 2**-14 the same way
  and multiplies by 2**14 and the scale in fp32. Both decoders are checked bit for bit on every
  code and every exponent by lab/mxfp4_decode_check.py (the PTX one on a GPU, the portable one
  in the CPU tests).
* A tile is loaded as (32-element blocks, rows, 16 bytes) and permuted to (rows, blocks, bytes),
  so each block's exponent is loaded once per row and broadcast over its 16 bytes in registers.
  Loading block-major spreads a warp's lanes along a row's blocks, and the decoded tile then
  reaches shared memory (where both matrix products read it) in 16-byte stores; loaded row-major,
  Triton wrote it with 2-byte stores (200 per thread per tile; geomean 102.7 -> 97.9 us).
  (Gathering the exponent once per byte instead, 16 repeated loads, measured 9% slower.)
* No interleaving shuffle: a byte holds elements 2i and 2i+1, so the low nibbles of a tile form
  the even-indexed columns and the high nibbles the odd ones. The query is loaded once split the
  same way, q.K^T = q_even.K_even^T + q_odd.K_odd^T, and P.V is accumulated as two 256-column
  halves written back to the even and odd output columns.
* Register double buffering: the raw bytes (and exponents) of the next tile are loaded before
  the current tile is decoded, so a load is always in flight while the ALUs decode.
* One program handles all 16 heads of a query row (the M=16 side of both matrix products), so a
  KV tile is decoded once and used by every head, and its 512 latent dims are used both as key
  part and as value.
* Split-K ("flash decoding"): with few sequences there are too few programs to fill the GPU, so
  each sequence's KV range is cut into NUM_SPLITS chunks handled by separate programs. Each writes
  a partial result (its output normalised by its own softmax sum, and the log-sum-exp) to a cached
  fp32 workspace, and a small second kernel merges the splits. With enough sequences the plan
  uses one split and the first kernel writes the bf16 output directly (one launch). The split
  count comes from the SM count, the average KV length and a cap on the partials' traffic.
* With q_seq_len > 1 a program takes up to Q_ROWS_PER_PROGRAM query rows of a sequence at once
  (M = 16 x rows), so their shared KV rows are read once for all of them.
* Lengths are ragged and only the device knows them: the host plans from the average length
  total_kv / batch (no synchronisation), every program reads its own bounds from kv_indptr, and a
  program whose chunk lies past its sequence's end writes a neutral partial (lse = -inf, zeros).
* Online softmax in base 2: sm_scale * log2(e) is folded into one multiplier.
* One kernel source for GPU and for Triton's CPU interpreter. The interpreter computes bf16 dots
  and bf16 arithmetic wrongly, so the matrix-product operand type is a constexpr: bf16 on GPUs,
  fp32 in the interpreter. Decoding and softmax arithmetic are fp32 everywhere.

On MI355X (gfx950): q.K^T straight from the packed keys
-------------------------------------------------------
CDNA4 multiplies fp4 by fp8 with an e8m0 exponent per 32 elements in one instruction
(v_mfma_scale_f32_16x16x128_f8f6f4), which Triton reaches through tl.dot_scaled when both operands
are fp8 / fp4. On gfx950 (QK_DOT_SCALED) the kernel hands it the keys as the cache holds them:
the packed bytes, transposed, as the "e2m1" rhs (packed along K, low nibble first, as here) and the
exponents as rhs_scale, (rows, K / 32): Triton takes scales only along K, in blocks of 32, which is
how the cache lays them out. The query is the "e4m3" lhs, without scales: OCP fp8 with one scale
per tensor (amax / 448, task.yml's precision contract; computed on the device each call and
applied to the scores). A bf16 query would not do: Triton then splits the product into fp4 -> bf16
conversions (v_cvt_scalef32_pk_bf16_fp4) and bf16 MFMA, as it does for the 64 rope dims here
(K = 64 is below the instruction's 128). The 512 value dims are still decoded by the portable code
for P.V: their exponents run along P.V's N dimension, which tl.dot_scaled cannot scale, and
triton.language has no fp4 conversion of its own (Gluon's fp4_to_fp is the one that reaches the
hardware's). On this path the tile is loaded row-major: the packed keys and the decoded values
then reach LDS in 18 8- and 16-byte stores per lane and tile, against about 100 1- and 2-byte ones
loaded block-major (compiled for gfx950). Compiled offline by `python eval.py --mode compile --target
gfx950 --submission submissions/triton_mxfp4.py` (which plans the launches as on an MI355X, so this
path; Triton 3.9): 238 VGPRs, no spills, 16 KiB LDS, 2 waves per SIMD, against 330 VGPRs and 1 wave
for the portable path (the same command with SUBMISSION_MXFP4_QK_DOT_SCALED=none). Not yet run on
AMD hardware. QK_DOT_SCALED = "all" forces the path anywhere:
Triton 3.9's CPU interpreter runs tl.dot_scaled
(tests/test_mxfp4_dot_scaled.py checks the path against the reference there), and on NVIDIA GPUs
Triton emulates it (lab/mxfp4_dot_scaled_check.py, the same check on a GPU).

The launch plan (split count, grid, workspaces) depends only on the shapes and is cached per
(batch, total_q, total_kv, device), so a call is: look up the plan, allocate the output, launch.
Launches after the first go straight to the compiled kernel (`_launch`), skipping Triton's
per-launch argument binding: on the H200 machine's CPU a launch through `kernel[grid](...)` costs
~30 us of host time; with direct launches a whole one-launch call takes 30-46 us (back to back,
BENCHMARKS.md session 18; 13-25 us of it this file's own Python). The direct launch relies on
Triton internals, so it is on only for the Triton versions in DIRECT_LAUNCH_TRITON; elsewhere
every launch takes Triton's normal path.
The split combine, the launch plan and `_launch` are one block of code shared by the three
bundled Triton files (kept identical by lab/shared_code.py).

The sm_90 path (NVIDIA H100 / H200, Gluon)
------------------------------------------
On an sm_90 GPU, with a Triton version in SM90_TRITON, batches of one query row per program take
`_mla_decode_sm90_ws_kernel`, written in Gluon (Triton's explicit-layout dialect). With M = 16 heads
the portable kernel gets only `mma.sync`, and one warpgroup decodes, multiplies and normalises in
turn. Here the work is split between warps (`gl.warp_specialize`): SM90_DECODER_WARPS decoder warps
copy each 64-row tile's packed codes by cp.async, decode them once with the PTX decoder above into
bf16 tiles in shared memory (even and odd elements apart, as above; a ring of two), and signal an
mbarrier; the kernel's own warpgroup takes the 64 cache rows as the M side of Hopper's warpgroup
MMA, S^T = K . q^T and O^T += V^T . P^T (bf16, q as given: no quantization), runs the online
softmax, and hands each decoded tile back as soon as its P.V has ended. The decoded rows reach the
swizzled tiles without bank conflicts (Nsight Compute: 4.2 M conflicts -> 7 thousand).
Session 17's first version, one warpgroup doing all of it in turn (since removed), measured 73.6
against 63.1 us (geomean; 4 decoder warps) in the same sweep.

What bounds it now (one H200, Triton 3.6; BENCHMARKS.md sessions 17 to 20)
---------------------------------------------------------------------------
The audited leaderboard of session 20 (call 4), us: 4x1k 14.2, 4x8k 22.2, 32x1k 21.9, 32x8k 77.3,
64x1k 30.3, 64x8k 142.9, 256x1k 77.2, 256x8k 519.5: geomean 55.7, 54.0 us of kernel time by
Nsight Compute (the file before its Gluon path 89.4 in the same run). The cache
is read at 27% / 30% of the copy bandwidth at 64x8k / 256x8k. Nsight Compute on the kernel at
64x8k (session 17; 12 warps per SM, one program): DRAM 25% busy, L1/shared 69%, 0.47 instructions
issued per scheduler and cycle with 0.79 warps eligible; a warp waits 6.3 cycles between
instructions, mostly on shared-memory results (short scoreboard 1.52 per instruction), global loads
(long scoreboard 0.92), barriers (0.63) and the math pipes (0.42). Neither DRAM nor shared memory
is saturated: the decoder warps' instruction stream (~3.3 instructions per element, issued with too
few warps to hide their latencies) and the MMA warpgroup's per-tile chain (q.K^T, a cross-warp max,
P through shared memory, P.V) bound it. What would lift it: fewer decode instructions (the issue's
byte-permute decode into fp8, with fp8 q.K^T), and a deeper ring of decoded tiles so that decoding
runs further ahead (shared memory allows two 74 KB bf16 tiles; fp8 tiles would allow more).
At 4x1k (MIN_TILES_PER_SPLIT 1: 16 splits per sequence, 64 programs; session 19's sweep 15.2 ->
13.9 us against 2) the kernel takes 8.9 us: DRAM 3% busy, 0.32 warps eligible per scheduler, 13.0
cycles between a warp's instructions, 36% of them waiting for sibling warps at a barrier (each
split is one 64-row tile, so decoding and the MMAs hardly overlap), then ~4 us of split combine.
"""

import math
import os

import torch
import triton
import triton.language as tl

try:                         # Gluon (Triton's explicit-layout dialect): the sm_90 fast path below
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.ampere import async_copy as gl_async_copy
    from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, warpgroup_mma,
                                                                    warpgroup_mma_init, warpgroup_mma_wait)
except ImportError:          # an older Triton: the portable kernel everywhere
    gluon = None

# ---------------------------------------------------------------------------------------------
# Tuning knobs (adjust here; everything below reads them).
# ---------------------------------------------------------------------------------------------
# Measured on one H200 with Triton 3.6 (see the module docstring); block_n >= 16 (the K dim of
# P.V), and block_n * 576 * element size * num_stages must fit in shared memory.
LAUNCH = {                   # (query rows per program, long sequences?) -> tile and launch shape
    (1, False): dict(block_n=32, num_warps=4, num_stages=2),
    (1, True): dict(block_n=32, num_warps=4, num_stages=2),
    (2, False): dict(block_n=64, num_warps=8, num_stages=2),
    (2, True): dict(block_n=64, num_warps=8, num_stages=2),
    (4, False): dict(block_n=64, num_warps=8, num_stages=2),
    (4, True): dict(block_n=64, num_warps=8, num_stages=2),
}
LONG_KV = 4096               # average KV rows per sequence from which the "long" settings apply
Q_ROWS_PER_PROGRAM = 4       # most query rows (x16 heads) per program when q_seq_len > 1 ...
MULTI_ROW_MIN_BATCH = 32     # ... used only with at least this many sequences
MULTI_ROW_MIN_KV = LONG_KV   # ... and at least this average KV length; else 1 row per program
WARPS_PER_SM = 8             # warps resident on one SM at ~255 registers per thread (65536 / (255 * 32)):
                             # split-K fills SMs x (WARPS_PER_SM // num_warps) program slots once
MIN_TILES_PER_SPLIT = 1      # never split so finely that a chunk holds fewer tiles than this
MAX_SPLITS = 64
PARTIAL_DTYPE = "float32"    # split-K partial outputs: "float32", or "float16" (half their bytes; the
                             # log-sum-exps stay fp32); float16 was slower on the H200 (BENCHMARKS.md session 19)
PARTIAL_LIMIT = 4.0          # split-K partials (written + read) may add at most this many
                             # bytes per cache byte read; caps splits when q_seq_len > 1
KV_ROW_BYTES = 306           # one cache row: 288 packed bytes + 18 exponents
COMBINE_BLOCK_ELEMS = 8192   # splits x value-dims handled by one combine program
PTX_DECODE = True            # decode with packed-pair PTX on NVIDIA GPUs (else the portable Triton code)
CPU_PROGRAM_SLOTS = 8        # stands in for the SM count under the CPU interpreter
# On AMD GPUs (torch.version.hip) every shape uses this smaller tile (MI300/MI355X have 64-160 KB
# of LDS per CU) plus AMD-only compiler options. Not yet run on AMD hardware.
AMD_LAUNCH = dict(block_n=32, num_warps=4, num_stages=2)
AMD_LAUNCH_OPTIONS = {"matrix_instr_nonkdim": 16}
# Where q.K^T takes the AMD-native path (tl.dot_scaled on the packed keys; see "On MI355X" in the
# module docstring): "gfx950" (MI355X only, the default: a ROCm device whose gcnArchName is gfx950,
# which the cross-compile report's --target gfx950 reports too), "all" (every device, the CPU
# interpreter and NVIDIA GPUs included: for checking that path where it can run), "none". Read at
# import, applied per plan; the environment variable sets it without editing the file.
QK_DOT_SCALED = os.environ.get("SUBMISSION_MXFP4_QK_DOT_SCALED", "gfx950")
E4M3_MAX = 448.0             # OCP fp8 e4m3 (MI355X's and NVIDIA's fp8): the query's range on that path
# NVIDIA sm_90 (H100 / H200) with one query row per sequence: the Gluon kernel below (each tile
# decoded once into shared memory, warpgroup MMAs on 64-row tiles), on the Triton versions where it
# was checked; everywhere else the portable one.
SM90_GLUON = True
SM90_TRITON = (("3", "6"),)  # (major, minor) versions where the Gluon kernel was checked and timed
SM90_LAUNCH = dict(block_n=64, num_warps=4, num_stages=1, programs_per_sm=1,   # 208 KB shared memory
                   stages=2, pv_buffers=2)
# num_warps: the MMA warpgroup (the decoder warps come on top); stages: packed tiles in flight
# (cp.async), 18 KB each; pv_buffers: the ring of decoded bf16 tiles (72 KB each).
SM90_SHORT_KV = True         # also for a few short sequences (session 17: faster at 4x1k, 32x1k, 64x1k)
SM90_DECODE_ROWS = 16        # cache rows decoded at a time (bounds registers)
SM90_DECODER_WARPS = 8       # warps of the decoder partition (4 or 8; session 17: 8 faster)
SM90_DECODER_REGS = 168      # registers per thread of the decoder warps (setmaxnreg; the MMA warpgroup gets the rest)
SM90_EARLY_RELEASE = True    # the MMA warpgroup waits for each P.V at once and hands its buffer back (else
                             # with the next tile's q.K^T wait; session 17: 58.3 -> 56.8 us)

NUM_HEADS = 16
D_NOPE = 512                 # latent dims: the value, and the first part of the key
D_ROPE = 64                  # rope dims: the rest of the key
MX_BLOCK = 32                # elements per shared e8m0 exponent
LOG2E = 1.4426950408889634


# ---------------------------------------------------------------------------------------------
# Decoding helpers (inlined into the kernel).
# ---------------------------------------------------------------------------------------------
@triton.jit
def _e2m1_times(code, scale):
    """4-bit e2m1 codes (uint16 holding 0..15) times fp32 scales, in fp32.

    fp16 with the sign in bit 15 and the magnitude code in bits 9..11 is exactly e2m1 * 2**-14;
    times 2**14 it is the e2m1 value (exact). The scale is applied separately: folding the 2**14
    into it would overflow fp32 for exponents >= 241 (and 0 * inf is NaN)."""
    bits = ((code & 8) << 12) | ((code & 7) << 9)
    return bits.to(tl.float16, bitcast=True).to(tl.float32) * 16384.0 * scale


@triton.jit
def _to_e4m3(x, scale):
    """x / scale as OCP fp8 e4m3, rounded as harness.task.quant.quantize_fp8 rounds it: fp32 division
    rounded to nearest, saturated at E4M3_MAX (448), rounded to the nearest e4m3, ties to even.
    That last rounding is done here, exactly, in fp32, so the conversion only changes the format:
    Triton 3.9's interpreter rounds fp32 -> fp8 wrongly where rounding carries into the exponent
    (126.5 becomes 64, not 128)."""
    x = tl.clamp(tl.div_rn(x.to(tl.float32), scale), -448.0, 448.0)
    bits = x.to(tl.int32, bitcast=True)        # normal e4m3 (|x| >= 2**-6): keep 3 mantissa bits
    normal = ((bits + 0x7FFFF + ((bits >> 20) & 1)) & -0x100000).to(tl.float32, bitcast=True)
    tiny = (x + 24576.0) - 24576.0             # subnormal e4m3: multiples of 2**-9 = ulp(1.5 * 2**14)
    return tl.where(tl.abs(x) < 0.015625, tiny, normal).to(tl.float8e4nv)


@triton.jit
def _load_fp4_raw(packed_ptr, scale_ptr, kv_row, kv_end, FIRST_BLOCK: tl.constexpr, NUM_BLOCKS: tl.constexpr,
                  stride_packed_row, stride_scale_row, MX_BLOCK: tl.constexpr, ROW_MAJOR: tl.constexpr = False):
    """Bytes of blocks FIRST_BLOCK.. of cache rows kv_row as (rows, blocks, bytes per block), and
    each block's e8m0 exponent as (rows, blocks). Rows at or past kv_end read as zeros."""
    BLOCK_BYTES: tl.constexpr = MX_BLOCK // 2
    block = FIRST_BLOCK + tl.arange(0, NUM_BLOCKS)
    n_ok = kv_row < kv_end
    if ROW_MAJOR:  # the QK_SCALED path: rows as tl.dot_scaled takes them; on AMD, wide LDS stores
        byte = block[None, :, None] * BLOCK_BYTES + tl.arange(0, BLOCK_BYTES)[None, None, :]
        packed = tl.load(packed_ptr + kv_row[:, None, None] * stride_packed_row + byte, mask=n_ok[:, None, None],
                         other=0)
        exponent = tl.load(scale_ptr + kv_row[:, None] * stride_scale_row + block[None, :], mask=n_ok[:, None],
                           other=0)
        return packed, exponent
    # Loaded as (blocks, rows, bytes) and permuted: Triton then spreads a warp's lanes along a row's
    # blocks, and the decoded tile reaches shared memory in 16-byte stores instead of 2-byte ones.
    byte = block[:, None, None] * BLOCK_BYTES + tl.arange(0, BLOCK_BYTES)[None, None, :]
    packed = tl.load(packed_ptr + kv_row[None, :, None] * stride_packed_row + byte, mask=n_ok[None, :, None], other=0)
    exponent = tl.load(scale_ptr + kv_row[None, :] * stride_scale_row + block[:, None], mask=n_ok[None, :], other=0)
    return tl.permute(packed, (1, 0, 2)), tl.trans(exponent)


# One 32-bit word of packed codes (bytes b0..b3, each: low nibble = even element, high nibble = odd
# element) -> the even elements of b0..b3 as two bf16x2 words ($0, $1) and the odd ones ($2, $3),
# times the block scale $5 (bf16x2 of 2**(e-127); $6..$8 repeat it: one input register per packed
# element). prmt spreads bytes b0, b1 (then b2, b3) into the two 16-bit halves; shifts and masks put
# a nibble's sign on bit 15 and its magnitude bits on bits 6..8 of a bf16, which is exactly
# e2m1 * 2**-126 (code 1 is a bf16 subnormal, which bf16 fma keeps); one fma by 2**126 restores the
# e2m1 value exactly and a second applies the scale. 3.25 instructions per element, all on packed pairs.
_E2M1_PTX = tl.constexpr("""{
.reg .b32 t0, t1, a, b, c126, nz;
mov.b32 c126, 0x7E807E80;
mov.b32 nz, 0x80008000;
prmt.b32 t0, $4, 0, 0x4140;
prmt.b32 t1, $4, 0, 0x4342;
shl.b32 a, t0, 12; shl.b32 b, t0, 6; and.b32 a, a, 0x80008000; and.b32 b, b, 0x01C001C0; or.b32 a, a, b;
fma.rn.bf16x2 a, a, c126, nz; fma.rn.bf16x2 $0, a, $5, nz;
shl.b32 a, t1, 12; shl.b32 b, t1, 6; and.b32 a, a, 0x80008000; and.b32 b, b, 0x01C001C0; or.b32 a, a, b;
fma.rn.bf16x2 a, a, c126, nz; fma.rn.bf16x2 $1, a, $5, nz;
shl.b32 a, t0, 8; shl.b32 b, t0, 2; and.b32 a, a, 0x80008000; and.b32 b, b, 0x01C001C0; or.b32 a, a, b;
fma.rn.bf16x2 a, a, c126, nz; fma.rn.bf16x2 $2, a, $5, nz;
shl.b32 a, t1, 8; shl.b32 b, t1, 2; and.b32 a, a, 0x80008000; and.b32 b, b, 0x01C001C0; or.b32 a, a, b;
fma.rn.bf16x2 a, a, c126, nz; fma.rn.bf16x2 $3, a, $5, nz;
}""")


@triton.jit
def _decode_fp4(packed, exponent, DOT_DTYPE: tl.constexpr, PTX_DECODE: tl.constexpr):
    """Packed bytes (rows, blocks, bytes) and their blocks' exponents (rows, blocks) -> (even
    elements, odd elements), each (rows, blocks * bytes): bf16 from the PTX decoder (GPUs use
    bf16 operands), else DOT_DTYPE."""
    ROWS: tl.constexpr = packed.shape[0]
    COLS: tl.constexpr = packed.shape[1] * packed.shape[2]
    e = exponent.to(tl.int32)
    if PTX_DECODE:  # NVIDIA GPUs, bf16 operands: packed-pair decoding in PTX
        scale = tl.where(e == 0, 0x40, e << 7)   # bf16 bits of 2**(e-127); e = 0 is a subnormal
        scale = tl.broadcast_to((scale | (scale << 16))[:, :, None], packed.shape)
        even, odd = tl.inline_asm_elementwise(_E2M1_PTX, "=r,=r,=r,=r,r,r,r,r,r", [packed, scale],
                                              dtype=(tl.bfloat16, tl.bfloat16), is_pure=True, pack=4)
        return tl.reshape(even, (ROWS, COLS)), tl.reshape(odd, (ROWS, COLS))
    else:           # portable: the interpreter, AMD
        scale = tl.where(e == 0, 0x400000, e << 23).to(tl.float32, bitcast=True)[:, :, None]  # 2**(e-127); e = 0: subnormal
        packed = packed.to(tl.uint16)
        even = tl.reshape(_e2m1_times(packed & 0xF, scale), (ROWS, COLS)).to(DOT_DTYPE)
        odd = tl.reshape(_e2m1_times(packed >> 4, scale), (ROWS, COLS)).to(DOT_DTYPE)
        return even, odd


# ---------------------------------------------------------------------------------------------
# Kernel 1: attention of a group of query rows over one chunk of its sequence's KV rows.
# ---------------------------------------------------------------------------------------------
@triton.jit
def _mla_decode_kernel(
    q_ptr, packed_ptr, scale_ptr, qo_indptr_ptr, kv_indptr_ptr,
    out_ptr, part_out_ptr, part_lse_ptr,
    q_scale_ptr,                                 # the query's fp8 scale (QK_SCALED), else None
    qk_scale,                                    # sm_scale * log2(e)
    stride_q_row, stride_q_head, stride_packed_row, stride_scale_row,
    NUM_HEADS: tl.constexpr, D_NOPE: tl.constexpr, D_ROPE: tl.constexpr, MX_BLOCK: tl.constexpr,
    Q_ROWS: tl.constexpr, Q_GROUPS: tl.constexpr,
    NUM_SPLITS: tl.constexpr, BLOCK_N: tl.constexpr,
    DOT_DTYPE: tl.constexpr, PTX_DECODE: tl.constexpr, QK_SCALED: tl.constexpr,
):
    M: tl.constexpr = Q_ROWS * NUM_HEADS
    HALF_NOPE: tl.constexpr = D_NOPE // 2        # bytes (= even or odd elements) of the latent part
    HALF_ROPE: tl.constexpr = D_ROPE // 2
    NOPE_BLOCKS: tl.constexpr = D_NOPE // MX_BLOCK   # 16 exponents for the latent part ...
    ROPE_BLOCKS: tl.constexpr = D_ROPE // MX_BLOCK   # ... and 2 for the rope part
    seq = tl.program_id(0) // Q_GROUPS
    group = tl.program_id(0) % Q_GROUPS
    split = tl.program_id(1)

    # This program's KV chunk: the sequence's range cut into NUM_SPLITS tile-aligned pieces.
    kv_start = tl.load(kv_indptr_ptr + seq)
    kv_end = tl.load(kv_indptr_ptr + seq + 1)
    chunk = tl.cdiv(tl.cdiv(kv_end - kv_start, NUM_SPLITS), BLOCK_N) * BLOCK_N
    chunk_start = kv_start + split * chunk
    chunk_end = tl.minimum(chunk_start + chunk, kv_end)

    offs_m = tl.arange(0, M)                     # row m = (query row m // 16, head m % 16)
    byte_nope = tl.arange(0, HALF_NOPE)          # byte c holds elements 2c (low) and 2c+1 (high)
    byte_rope = HALF_NOPE + tl.arange(0, HALF_ROPE)
    offs_n = tl.arange(0, BLOCK_N)
    if QK_SCALED:  # the scores come out in units of the fp8 query's scale
        q_scale = tl.load(q_scale_ptr)
        qk_scale = qk_scale * q_scale

    # Query rows of this sequence, Q_ROWS at a time; groups interleave so that uniform q_seq_len
    # <= Q_ROWS * Q_GROUPS means exactly one pass per program.
    q_start = tl.load(qo_indptr_ptr + seq)
    q_end = tl.load(qo_indptr_ptr + seq + 1)
    for q0 in range(q_start + group * Q_ROWS, q_end, Q_GROUPS * Q_ROWS):
        q_row = q0 + offs_m // NUM_HEADS
        head = offs_m % NUM_HEADS
        row_ok = q_row < q_end
        q_base = q_ptr + q_row[:, None] * stride_q_row + head[:, None] * stride_q_head
        if QK_SCALED:  # the query as fp8 e4m3 in natural column order, for the scaled products
            q_nope = _to_e4m3(tl.load(q_base + tl.arange(0, D_NOPE)[None, :], mask=row_ok[:, None], other=0.0),
                              q_scale)
            q_rope = _to_e4m3(tl.load(q_base + D_NOPE + tl.arange(0, D_ROPE)[None, :], mask=row_ok[:, None],
                                      other=0.0), q_scale)
        else:
            # The query split into even and odd columns, matching the low and high nibbles.
            q_nope_even = tl.load(q_base + 2 * byte_nope[None, :], mask=row_ok[:, None], other=0.0).to(DOT_DTYPE)
            q_nope_odd = tl.load(q_base + 2 * byte_nope[None, :] + 1, mask=row_ok[:, None], other=0.0).to(DOT_DTYPE)
            q_rope_even = tl.load(q_base + 2 * byte_rope[None, :], mask=row_ok[:, None], other=0.0).to(DOT_DTYPE)
            q_rope_odd = tl.load(q_base + 2 * byte_rope[None, :] + 1, mask=row_ok[:, None], other=0.0).to(DOT_DTYPE)

        m_i = tl.full([M], float("-inf"), tl.float32)    # running max (log2 units)
        l_i = tl.zeros([M], tl.float32)                  # running softmax denominator
        acc_even = tl.zeros([M, HALF_NOPE], tl.float32)  # running numerator . V, even columns
        acc_odd = tl.zeros([M, HALF_NOPE], tl.float32)   # ... and odd columns

        # Register double buffering: the raw bytes of the next tile are requested before the
        # current tile is decoded and used, so a load is always in flight while the ALUs decode.
        raw_nope, exp_nope = _load_fp4_raw(packed_ptr, scale_ptr, chunk_start + offs_n, chunk_end, 0, NOPE_BLOCKS,
                                           stride_packed_row, stride_scale_row, MX_BLOCK, QK_SCALED)
        raw_rope, exp_rope = _load_fp4_raw(packed_ptr, scale_ptr, chunk_start + offs_n, chunk_end, NOPE_BLOCKS,
                                           ROPE_BLOCKS, stride_packed_row, stride_scale_row, MX_BLOCK, QK_SCALED)
        for n0 in range(chunk_start, chunk_end, BLOCK_N):
            n_ok = n0 + offs_n < chunk_end
            next_row = n0 + BLOCK_N + offs_n
            next_raw_nope, next_exp_nope = _load_fp4_raw(packed_ptr, scale_ptr, next_row, chunk_end, 0, NOPE_BLOCKS,
                                                         stride_packed_row, stride_scale_row, MX_BLOCK, QK_SCALED)
            next_raw_rope, next_exp_rope = _load_fp4_raw(packed_ptr, scale_ptr, next_row, chunk_end, NOPE_BLOCKS,
                                                         ROPE_BLOCKS, stride_packed_row, stride_scale_row, MX_BLOCK,
                                                         QK_SCALED)
            if QK_SCALED:
                # Keys straight from the packed bytes (K = 512 + 64, the block exponents along K);
                # only the 512 value dims are decoded.
                k_nope_even, k_nope_odd = _decode_fp4(raw_nope, exp_nope, DOT_DTYPE, PTX_DECODE)
                s = tl.dot_scaled(q_nope, None, "e4m3", tl.trans(tl.reshape(raw_nope, (BLOCK_N, HALF_NOPE))),
                                  exp_nope, "e2m1")
                s = tl.dot_scaled(q_rope, None, "e4m3", tl.trans(tl.reshape(raw_rope, (BLOCK_N, HALF_ROPE))),
                                  exp_rope, "e2m1", s)
            else:
                # Decode the tile once: its 512 latent dims serve as key part and as value.
                k_nope_even, k_nope_odd = _decode_fp4(raw_nope, exp_nope, DOT_DTYPE, PTX_DECODE)
                k_rope_even, k_rope_odd = _decode_fp4(raw_rope, exp_rope, DOT_DTYPE, PTX_DECODE)

                s = tl.dot(q_nope_even, tl.trans(k_nope_even))
                s = tl.dot(q_nope_odd, tl.trans(k_nope_odd), s)
                s = tl.dot(q_rope_even, tl.trans(k_rope_even), s)
                s = tl.dot(q_rope_odd, tl.trans(k_rope_odd), s)
            s = tl.where(n_ok[None, :], s * qk_scale, float("-inf"))

            m_new = tl.maximum(m_i, tl.max(s, 1))
            alpha = tl.exp2(m_i - m_new)
            p = tl.exp2(s - m_new[:, None])
            l_i = l_i * alpha + tl.sum(p, 1)
            p = p.to(DOT_DTYPE)
            acc_even = tl.dot(p, k_nope_even, acc_even * alpha[:, None])
            acc_odd = tl.dot(p, k_nope_odd, acc_odd * alpha[:, None])
            m_i = m_new
            raw_nope, exp_nope, raw_rope, exp_rope = next_raw_nope, next_exp_nope, next_raw_rope, next_exp_rope

        # A program with no KV rows keeps l = 0: its output is 0 and its lse is -inf.
        has_rows = l_i > 0.0
        inv_l = 1.0 / tl.where(has_rows, l_i, 1.0)
        out_even = acc_even * inv_l[:, None]
        out_odd = acc_odd * inv_l[:, None]
        out_row = q_row * NUM_HEADS + head           # rows of the contiguous (total_q*16, .) output
        col_even = 2 * byte_nope[None, :]
        if NUM_SPLITS == 1:
            o_ptrs = out_ptr + out_row[:, None] * D_NOPE + col_even
            tl.store(o_ptrs, out_even.to(out_ptr.dtype.element_ty), mask=row_ok[:, None])
            tl.store(o_ptrs + 1, out_odd.to(out_ptr.dtype.element_ty), mask=row_ok[:, None])
        else:
            part_row = out_row * NUM_SPLITS + split
            lse = tl.where(has_rows, m_i + tl.log2(tl.where(has_rows, l_i, 1.0)), float("-inf"))
            tl.store(part_lse_ptr + part_row, lse, mask=row_ok)
            p_ptrs = part_out_ptr + part_row[:, None] * D_NOPE + col_even
            tl.store(p_ptrs, out_even, mask=row_ok[:, None])
            tl.store(p_ptrs + 1, out_odd, mask=row_ok[:, None])


# ---------------------------------------------------------------------------------------------
# The sm_90 fast path (Gluon, warp-specialized): per 64-row tile, "decoder" warps copy the packed
# codes by cp.async and decode them once (the PTX decoder above) into a ring of bf16 tiles in shared
# memory; the kernel's own warpgroup takes the 64 cache rows as the M side of warpgroup MMAs,
# S^T = K.q^T and O^T += V^T.P^T, and runs the softmax; mbarriers pass the tiles between the two.
# (One warpgroup doing all of it in turn issued one instruction every ~3 cycles and was 17% slower,
# Nsight Compute and BENCHMARKS.md, session 17.)
# ---------------------------------------------------------------------------------------------
if gluon is not None:
    @gluon.jit
    def _sm90_issue_blocks(smem, packed_ptr, row0, chunk_end, stride_packed_row, BLOCK_N: gl.constexpr,
                           FIRST: gl.constexpr, BLOCKS: gl.constexpr, layout: gl.constexpr):
        """Start copying the packed codes of blocks FIRST .. FIRST + BLOCKS of cache rows row0 ..
        row0 + BLOCK_N as (rows, blocks, 16 bytes); rows at or past chunk_end read as 0."""
        rows = row0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, gl.SliceLayout(2, layout)))
        blk = FIRST + gl.arange(0, BLOCKS, layout=gl.SliceLayout(0, gl.SliceLayout(2, layout)))
        byte = gl.arange(0, 16, layout=gl.SliceLayout(0, gl.SliceLayout(1, layout)))
        gl_async_copy.async_copy_global_to_shared(
            smem, packed_ptr + rows[:, None, None] * stride_packed_row + blk[None, :, None] * 16
            + byte[None, None, :], mask=(rows < chunk_end)[:, None, None])

    @gluon.jit
    def _sm90_issue_packed(nope_smem, rope_smem, packed_ptr, row0, chunk_end, stride_packed_row,
                           BLOCK_N: gl.constexpr, nope_l: gl.constexpr, rope_l: gl.constexpr):
        """Start copying a tile's packed codes: the 16 latent blocks, then the 2 rope blocks."""
        _sm90_issue_blocks(nope_smem, packed_ptr, row0, chunk_end, stride_packed_row, BLOCK_N, 0, 16, nope_l)
        _sm90_issue_blocks(rope_smem, packed_ptr, row0, chunk_end, stride_packed_row, BLOCK_N, 16, 2, rope_l)

    @gluon.jit
    def _sm90_load_exponents(scale_ptr, row0, chunk_end, stride_scale_row, BLOCK_N: gl.constexpr,
                             BLOCKS: gl.constexpr, FIRST: gl.constexpr, layout: gl.constexpr):
        """The e8m0 exponents of blocks FIRST .. FIRST + BLOCKS of cache rows row0 .. row0 + BLOCK_N
        (0 past chunk_end), into registers."""
        rows = row0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, layout))
        blk = FIRST + gl.arange(0, BLOCKS, layout=gl.SliceLayout(0, layout))
        return gl.load(scale_ptr + rows[:, None] * stride_scale_row + blk[None, :], mask=(rows < chunk_end)[:, None],
                       other=0)

    @gluon.jit
    def _sm90_decode(raw_smem, exp_smem, even_smem, odd_smem, ROWS: gl.constexpr, layout: gl.constexpr):
        """Decode packed codes (rows, blocks, 16 bytes) with their exponents (rows, blocks) into the
        even and odd elements, bf16 (rows, blocks * 16), in shared memory."""
        raw = raw_smem.load(layout)
        e = exp_smem.load(gl.SliceLayout(2, layout)).to(gl.int32)
        scale = gl.where(e == 0, 0x40, e << 7)   # bf16 bits of 2**(e-127); e = 0 is a subnormal
        scale, raw = gl.broadcast(gl.expand_dims(scale | (scale << 16), 2), raw)
        even, odd = gl.inline_asm_elementwise(_E2M1_PTX, "=r,=r,=r,=r,r,r,r,r,r", [raw, scale],
                                              dtype=(gl.bfloat16, gl.bfloat16), is_pure=True, pack=4)
        even_smem.store(gl.reshape(even, [ROWS, raw.shape[1] * raw.shape[2]]))
        odd_smem.store(gl.reshape(odd, [ROWS, raw.shape[1] * raw.shape[2]]))

    @gluon.jit
    def _sm90_stage_q(q_ptr, q_row, stride_q_row, stride_q_head, FIRST: gl.constexpr, HALF: gl.constexpr,
                      even_smem, odd_smem, layout: gl.constexpr):
        """The query's columns FIRST + 2c (even) and FIRST + 2c + 1 (odd), c < HALF, of all 16 heads,
        into shared memory (bf16)."""
        h = gl.arange(0, 16, layout=gl.SliceLayout(1, layout))
        c = gl.arange(0, HALF, layout=gl.SliceLayout(0, layout))
        base = q_ptr + q_row * stride_q_row + h[:, None] * stride_q_head + FIRST + 2 * c[None, :]
        even_smem.store(gl.load(base).to(gl.bfloat16))
        odd_smem.store(gl.load(base + 1).to(gl.bfloat16))

    @gluon.jit
    def _sm90_ws_decoder(packed_ptr, scale_ptr, stride_packed_row, stride_scale_row, chunk_start, chunk_end,
                         n_tiles, q_start, q_end, group,
                         nope_smem, rope_smem, exp_smem, rexp_smem, ve_smem, vo_smem, re_smem, ro_smem,
                         ready, empty, Q_GROUPS: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
                         NBUF: gl.constexpr, DECODE_ROWS: gl.constexpr, DW: gl.constexpr):
        NB: gl.constexpr = 16
        nope_l: gl.constexpr = gl.BlockedLayout([1, 1, 16], [2, 16, 1], [DW, 1, 1], [2, 1, 0])
        dec_l: gl.constexpr = gl.BlockedLayout([1, 1, 8], [1, 16, 2], [DW, 1, 1], [2, 1, 0])
        rope_l: gl.constexpr = gl.BlockedLayout([1, 1, 8], [8, 2, 2], [DW, 1, 1], [2, 1, 0])
        exp_l: gl.constexpr = gl.BlockedLayout([1, 4], [8, 4], [DW, 1], [1, 0])
        rexp_l: gl.constexpr = gl.BlockedLayout([1, 2], [32, 1], [DW, 1], [1, 0])
        count = 0                                 # tiles decoded so far (all query rows): ring position
        for q_row in range(q_start + group, q_end, Q_GROUPS):
            for t in gl.static_range(STAGES):
                _sm90_issue_packed(nope_smem.index(t), rope_smem.index(t), packed_ptr, chunk_start + t * BLOCK_N,
                                   chunk_end, stride_packed_row, BLOCK_N, nope_l, rope_l)
                gl_async_copy.commit_group()
            e_next = _sm90_load_exponents(scale_ptr, chunk_start, chunk_end, stride_scale_row, BLOCK_N, NB, 0, exp_l)
            r_next = _sm90_load_exponents(scale_ptr, chunk_start, chunk_end, stride_scale_row, BLOCK_N, 2, NB, rexp_l)
            for t in range(n_tiles):
                exp_smem.store(e_next)
                rexp_smem.store(r_next)
                gl_async_copy.wait_group(STAGES - 1)
                gl.thread_barrier()                   # every decoder thread's copies and exponents
                row0 = chunk_start + t * BLOCK_N
                e_next = _sm90_load_exponents(scale_ptr, row0 + BLOCK_N, chunk_end, stride_scale_row, BLOCK_N, NB, 0,
                                              exp_l)
                r_next = _sm90_load_exponents(scale_ptr, row0 + BLOCK_N, chunk_end, stride_scale_row, BLOCK_N, 2, NB,
                                              rexp_l)
                stage = t % STAGES
                buf = count % NBUF
                mbarrier.wait(empty.index(buf), ((count // NBUF) & 1) ^ 1)   # the MMAs are done with it
                ve = ve_smem.index(buf)
                vo = vo_smem.index(buf)
                for r in gl.static_range(BLOCK_N // DECODE_ROWS):
                    _sm90_decode(nope_smem.index(stage).slice(r * DECODE_ROWS, DECODE_ROWS, dim=0),
                                 exp_smem.slice(r * DECODE_ROWS, DECODE_ROWS, dim=0),
                                 ve.slice(r * DECODE_ROWS, DECODE_ROWS, dim=0),
                                 vo.slice(r * DECODE_ROWS, DECODE_ROWS, dim=0), DECODE_ROWS, dec_l)
                _sm90_decode(rope_smem.index(stage), rexp_smem, re_smem.index(buf), ro_smem.index(buf), BLOCK_N,
                             rope_l)
                fence_async_shared()                  # decoded tiles, read next by the tensor cores
                gl.thread_barrier()                   # every decoder thread's stores, and reads of the stage
                mbarrier.arrive(ready.index(buf))
                _sm90_issue_packed(nope_smem.index(stage), rope_smem.index(stage), packed_ptr,
                                   row0 + STAGES * BLOCK_N, chunk_end, stride_packed_row, BLOCK_N, nope_l, rope_l)
                gl_async_copy.commit_group()
                count += 1
            gl_async_copy.wait_group(0)
            gl.thread_barrier()

    @gluon.jit
    def _sm90_ws_mma(q_ptr, out_ptr, part_out_ptr, part_lse_ptr, qk_scale, stride_q_row, stride_q_head,
                     chunk_start, chunk_end, n_tiles, q_start, q_end, group, split,
                     ve_smem, vo_smem, re_smem, ro_smem, qe_smem, qo_smem, qre_smem, qro_smem, p_smem,
                     ready, empty, Q_GROUPS: gl.constexpr, NUM_SPLITS: gl.constexpr, BLOCK_N: gl.constexpr,
                     NBUF: gl.constexpr, EARLY_RELEASE: gl.constexpr):
        W: gl.constexpr = 4
        H: gl.constexpr = 16
        HV: gl.constexpr = 256
        q_l: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [W, 1], [1, 0])
        qr_l: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [W, 1], [1, 0])
        s_l: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 16, 16])
        o_l: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[W, 1], instr_shape=[16, 16, 16])
        count = 0
        for q_row in range(q_start + group, q_end, Q_GROUPS):
            _sm90_stage_q(q_ptr, q_row, stride_q_row, stride_q_head, 0, HV, qe_smem, qo_smem, q_l)
            _sm90_stage_q(q_ptr, q_row, stride_q_row, stride_q_head, 2 * HV, 32, qre_smem, qro_smem, qr_l)
            fence_async_shared()
            gl.thread_barrier()
            m_i = gl.full([H], float("-inf"), gl.float32, layout=gl.SliceLayout(0, s_l))   # log2 units
            l_acc = gl.zeros([BLOCK_N, H], gl.float32, layout=s_l)
            acc_e = warpgroup_mma_init(gl.zeros([HV, H], gl.float32, layout=o_l))
            acc_o = warpgroup_mma_init(gl.zeros([HV, H], gl.float32, layout=o_l))
            for t in range(n_tiles):
                buf = count % NBUF
                mbarrier.wait(ready.index(buf), (count // NBUF) & 1)
                ve = ve_smem.index(buf)
                vo = vo_smem.index(buf)
                p_buf = p_smem.index(buf)
                s = warpgroup_mma(ve, qe_smem.permute((1, 0)), gl.zeros([BLOCK_N, H], gl.float32, layout=s_l),
                                  use_acc=False, is_async=True)
                s = warpgroup_mma(vo, qo_smem.permute((1, 0)), s, is_async=True)
                s = warpgroup_mma(re_smem.index(buf), qre_smem.permute((1, 0)), s, is_async=True)
                s = warpgroup_mma(ro_smem.index(buf), qro_smem.permute((1, 0)), s, is_async=True)
                s, acc_e, acc_o = warpgroup_mma_wait(num_outstanding=0, deps=(s, acc_e, acc_o))
                if not EARLY_RELEASE:
                    # The previous tile's P.V has ended with that wait: its buffer goes back to the decoders.
                    mbarrier.arrive(empty.index((count + NBUF - 1) % NBUF), pred=t > 0)

                rows = chunk_start + t * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, s_l))
                s = gl.where((rows < chunk_end)[:, None], s * qk_scale, float("-inf"))
                m_new = gl.maximum(m_i, gl.max(s, 0))
                alpha = gl.exp2(m_i - m_new)
                p = gl.exp2(s - m_new[None, :])
                l_acc = l_acc * alpha[None, :] + p
                m_i = m_new
                p_buf.store(gl.permute(p.to(gl.bfloat16), [1, 0]))
                fence_async_shared()
                gl.thread_barrier()                   # every warp's P
                alpha_o = gl.convert_layout(alpha, gl.SliceLayout(0, o_l))[None, :]
                acc_e = warpgroup_mma(ve.permute((1, 0)), p_buf.permute((1, 0)), acc_e * alpha_o, is_async=True)
                acc_o = warpgroup_mma(vo.permute((1, 0)), p_buf.permute((1, 0)), acc_o * alpha_o, is_async=True)
                if EARLY_RELEASE:   # wait for this P.V here and hand the buffer back at once
                    acc_e, acc_o = warpgroup_mma_wait(num_outstanding=0, deps=(acc_e, acc_o))
                    acc_e = warpgroup_mma_init(acc_e)
                    acc_o = warpgroup_mma_init(acc_o)
                    mbarrier.arrive(empty.index(buf))
                count += 1
            acc_e, acc_o = warpgroup_mma_wait(num_outstanding=0, deps=(acc_e, acc_o))
            if not EARLY_RELEASE:
                mbarrier.arrive(empty.index((count + NBUF - 1) % NBUF), pred=n_tiles > 0)
            l_i = gl.sum(l_acc, 0)

            has_rows = l_i > 0.0
            norm = gl.convert_layout(1.0 / gl.where(has_rows, l_i, 1.0), gl.SliceLayout(0, o_l))[None, :]
            col = 2 * gl.arange(0, HV, layout=gl.SliceLayout(1, o_l))[:, None]
            out_row = q_row * H + gl.arange(0, H, layout=gl.SliceLayout(0, o_l))[None, :]
            if NUM_SPLITS == 1:
                dst = out_ptr + out_row * (2 * HV) + col
                gl.store(dst, (acc_e * norm).to(out_ptr.dtype.element_ty))
                gl.store(dst + 1, (acc_o * norm).to(out_ptr.dtype.element_ty))
            else:
                dst = part_out_ptr + (out_row * NUM_SPLITS + split) * (2 * HV) + col
                gl.store(dst, (acc_e * norm).to(part_out_ptr.dtype.element_ty))
                gl.store(dst + 1, (acc_o * norm).to(part_out_ptr.dtype.element_ty))
                lse = gl.where(has_rows, m_i + gl.log2(gl.where(has_rows, l_i, 1.0)), float("-inf"))
                lse_row = q_row * H + gl.arange(0, H, layout=gl.SliceLayout(0, s_l))
                gl.store(part_lse_ptr + lse_row * NUM_SPLITS + split, lse)
            gl.thread_barrier()                       # q's buffers are rewritten for the next row

    @gluon.jit
    def _mla_decode_sm90_ws_kernel(
        q_ptr, packed_ptr, scale_ptr, qo_indptr_ptr, kv_indptr_ptr,
        out_ptr, part_out_ptr, part_lse_ptr, qk_scale,
        stride_q_row, stride_q_head, stride_packed_row, stride_scale_row,
        Q_GROUPS: gl.constexpr, NUM_SPLITS: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
        NBUF: gl.constexpr, DECODE_ROWS: gl.constexpr, DECODER_WARPS: gl.constexpr, DECODER_REGS: gl.constexpr,
        EARLY_RELEASE: gl.constexpr,
    ):
        H: gl.constexpr = 16
        HV: gl.constexpr = 256
        HR: gl.constexpr = 32
        NB: gl.constexpr = 16
        plain3: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [2, 1, 0])
        plain2: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])
        v_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HV], gl.bfloat16)
        r_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HR], gl.bfloat16)
        nope_smem = gl.allocate_shared_memory(gl.uint8, [STAGES, BLOCK_N, NB, 16], plain3)
        rope_smem = gl.allocate_shared_memory(gl.uint8, [STAGES, BLOCK_N, 2, 16], plain3)
        exp_smem = gl.allocate_shared_memory(gl.uint8, [BLOCK_N, NB], plain2)
        rexp_smem = gl.allocate_shared_memory(gl.uint8, [BLOCK_N, 2], plain2)
        ve_smem = gl.allocate_shared_memory(gl.bfloat16, [NBUF, BLOCK_N, HV], v_layout)
        vo_smem = gl.allocate_shared_memory(gl.bfloat16, [NBUF, BLOCK_N, HV], v_layout)
        re_smem = gl.allocate_shared_memory(gl.bfloat16, [NBUF, BLOCK_N, HR], r_layout)
        ro_smem = gl.allocate_shared_memory(gl.bfloat16, [NBUF, BLOCK_N, HR], r_layout)
        qe_smem = gl.allocate_shared_memory(gl.bfloat16, [H, HV], gl.NVMMASharedLayout.get_default_for([H, HV], gl.bfloat16))
        qo_smem = gl.allocate_shared_memory(gl.bfloat16, [H, HV], gl.NVMMASharedLayout.get_default_for([H, HV], gl.bfloat16))
        qre_smem = gl.allocate_shared_memory(gl.bfloat16, [H, HR], gl.NVMMASharedLayout.get_default_for([H, HR], gl.bfloat16))
        qro_smem = gl.allocate_shared_memory(gl.bfloat16, [H, HR], gl.NVMMASharedLayout.get_default_for([H, HR], gl.bfloat16))
        p_smem = gl.allocate_shared_memory(gl.bfloat16, [NBUF, H, BLOCK_N],
                                           gl.NVMMASharedLayout.get_default_for([H, BLOCK_N], gl.bfloat16))
        ready = gl.allocate_shared_memory(gl.int64, [NBUF, 1], mbarrier.MBarrierLayout())   # decoded, for the MMAs
        empty = gl.allocate_shared_memory(gl.int64, [NBUF, 1], mbarrier.MBarrierLayout())   # read, for the decoders
        for i in gl.static_range(NBUF):
            mbarrier.init(ready.index(i), count=1)
            mbarrier.init(empty.index(i), count=1)

        seq = gl.program_id(0) // Q_GROUPS
        group = gl.program_id(0) % Q_GROUPS
        split = gl.program_id(1)
        kv_start = gl.load(kv_indptr_ptr + seq)
        kv_end = gl.load(kv_indptr_ptr + seq + 1)
        chunk = gl.cdiv(gl.cdiv(kv_end - kv_start, NUM_SPLITS), BLOCK_N) * BLOCK_N
        chunk_start = kv_start + split * chunk
        chunk_end = gl.minimum(chunk_start + chunk, kv_end)
        n_tiles = gl.maximum(gl.cdiv(chunk_end - chunk_start, BLOCK_N), 0)
        q_start = gl.load(qo_indptr_ptr + seq)
        q_end = gl.load(qo_indptr_ptr + seq + 1)

        gl.warp_specialize([
            (_sm90_ws_mma, (q_ptr, out_ptr, part_out_ptr, part_lse_ptr, qk_scale, stride_q_row, stride_q_head,
                            chunk_start, chunk_end, n_tiles, q_start, q_end, group, split,
                            ve_smem, vo_smem, re_smem, ro_smem, qe_smem, qo_smem, qre_smem, qro_smem, p_smem,
                            ready, empty, Q_GROUPS, NUM_SPLITS, BLOCK_N, NBUF, EARLY_RELEASE)),
            (_sm90_ws_decoder, (packed_ptr, scale_ptr, stride_packed_row, stride_scale_row, chunk_start, chunk_end,
                                n_tiles, q_start, q_end, group,
                                nope_smem, rope_smem, exp_smem, rexp_smem, ve_smem, vo_smem, re_smem, ro_smem,
                                ready, empty, Q_GROUPS, BLOCK_N, STAGES, NBUF, DECODE_ROWS, DECODER_WARPS)),
        ], [DECODER_WARPS], [DECODER_REGS])


# ==== shared sm_90 code: the same in triton_fp8.py and triton_mxfp4.py, to the end mark
# ==== (tests/test_shared_code.py). Edit it in triton_fp8.py, then: python lab/shared_code.py --write
def _sm90_path(device: torch.device, interpreted: bool) -> bool:
    """Whether launches on `device` take the Gluon kernel: an NVIDIA sm_90 GPU, a Triton version in
    SM90_TRITON with Gluon, and the SM90_GLUON knob on."""
    if not SM90_GLUON or gluon is None or interpreted or torch.version.hip or device.type != "cuda":
        return False
    if tuple(triton.__version__.split(".")[:2]) not in SM90_TRITON:
        return False
    return torch.cuda.get_device_capability(device) == (9, 0)
# ==== end of shared sm_90 code ====


def _file_launch(q_rows: int, avg_kv: float, programs: int, sms: int, device: torch.device,
                 interpreted: bool, amd: bool) -> dict:
    """This file's tile and launch shape for a plan (the shared `_make_plan` below asks): `programs`
    query-row groups of `avg_kv` cache rows on average, `sms` SMs (0 under the interpreter)."""
    long_kv, fills_gpu = avg_kv >= LONG_KV, programs >= sms > 0
    if q_rows == 1 and (long_kv or fills_gpu or SM90_SHORT_KV) and _sm90_path(device, interpreted):
        return SM90_LAUNCH
    return AMD_LAUNCH if amd else LAUNCH[(q_rows, long_kv)]


def _format_plan(device: torch.device, interpreted: bool, amd: bool, launch: dict) -> dict:
    """This file's own entries of a launch plan; the shared `_make_plan` below adds them."""
    qk_scaled = QK_DOT_SCALED == "all" or (QK_DOT_SCALED == "gfx950" and amd and str(
        getattr(torch.cuda.get_device_properties(device), "gcnArchName", "")).startswith("gfx950"))
    sm90 = launch is SM90_LAUNCH
    return dict(dot_dtype=tl.float32 if interpreted else tl.bfloat16,
                ptx_decode=not interpreted and not amd and PTX_DECODE, qk_scaled=qk_scaled and not sm90,
                sm90=launch if sm90 else None)


# ==== shared code: the same in triton_bf16.py, triton_fp8.py and triton_mxfp4.py, from here to the
# ==== end mark (tests/test_shared_code.py). Edit it in triton_bf16.py, then: python lab/shared_code.py --write
# ---------------------------------------------------------------------------------------------
# Kernel 2: merge the NUM_SPLITS partial results of each (query row, head).
# ---------------------------------------------------------------------------------------------
@triton.jit
def _combine_splits_kernel(
    part_out_ptr, part_lse_ptr, out_ptr,
    NUM_SPLITS: tl.constexpr, SPLITS_POW2: tl.constexpr,
    D_V: tl.constexpr, BLOCK_DV: tl.constexpr,
):
    row = tl.program_id(0)                       # query row * 16 + head
    offs_dv = tl.program_id(1) * BLOCK_DV + tl.arange(0, BLOCK_DV)
    offs_s = tl.arange(0, SPLITS_POW2)
    s_ok = offs_s < NUM_SPLITS

    lse = tl.load(part_lse_ptr + row * NUM_SPLITS + offs_s, mask=s_ok, other=float("-inf"))
    lse_max = tl.max(lse, 0)
    lse_max = tl.where(lse_max == float("-inf"), 0.0, lse_max)   # empty sequence: all -inf
    weight = tl.exp2(lse - lse_max)                              # 0 for empty splits
    parts = tl.load(part_out_ptr + (row * NUM_SPLITS + offs_s)[:, None] * D_V + offs_dv[None, :],
                    mask=s_ok[:, None], other=0.0)
    total = tl.sum(weight, 0)
    out = tl.sum(parts * weight[:, None], 0) / tl.where(total > 0.0, total, 1.0)
    tl.store(out_ptr + row * D_V + offs_dv, out.to(out_ptr.dtype.element_ty))


# ---------------------------------------------------------------------------------------------
# Launch plan: everything that depends only on shapes, computed once per shape.
# ---------------------------------------------------------------------------------------------
_PLANS = {}


def _interpreted(device: torch.device) -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1" or device.type == "cpu"


def _make_plan(batch: int, total_q: int, total_kv: int, device: torch.device) -> dict:
    interpreted = _interpreted(device)
    avg_q = max(1, -(-total_q // max(batch, 1)))
    avg_kv = total_kv / max(batch, 1)           # the host cannot know the longest without a sync
    multi_row = batch >= MULTI_ROW_MIN_BATCH and avg_kv >= MULTI_ROW_MIN_KV
    q_rows = min(Q_ROWS_PER_PROGRAM if multi_row else 1, triton.next_power_of_2(avg_q))
    q_groups = -(-avg_q // q_rows)
    programs = max(batch * q_groups, 1)
    amd = bool(torch.version.hip) and not interpreted
    sms = 0 if interpreted else torch.cuda.get_device_properties(device).multi_processor_count
    launch = _file_launch(q_rows, avg_kv, programs, sms, device, interpreted, amd)
    block_n = launch["block_n"]
    per_sm = launch.get("programs_per_sm", max(1, WARPS_PER_SM // launch["num_warps"]))
    slots = CPU_PROGRAM_SLOTS if interpreted else sms * per_sm

    # Split-K: enough programs to fill every slot in one wave (a second, partial wave would
    # nearly double the time), but each chunk keeps a few tiles of work.
    splits = slots // programs
    part_dtype = getattr(torch, PARTIAL_DTYPE)
    partial_bytes = 2 * avg_q * NUM_HEADS * (D_NOPE * part_dtype.itemsize + 4)   # per split and sequence
    splits = min(splits, int(avg_kv // (block_n * MIN_TILES_PER_SPLIT)), MAX_SPLITS,
                 int(PARTIAL_LIMIT * avg_kv * KV_ROW_BYTES / partial_bytes))
    splits = max(1, splits)

    plan = dict(
        grid=(programs, splits),
        direct={},                               # compiled kernels, for _launch
        q_rows=q_rows, q_groups=q_groups, splits=splits,
        **_format_plan(device, interpreted, amd, launch),
        block_n=block_n,
        options=dict(num_warps=launch["num_warps"], num_stages=launch["num_stages"]),
    )
    if amd:
        plan["options"].update(AMD_LAUNCH_OPTIONS)
    if splits > 1:
        splits_pow2 = triton.next_power_of_2(splits)
        block_dv = max(16, min(D_NOPE, COMBINE_BLOCK_ELEMS // splits_pow2))
        plan.update(
            part_out=torch.empty(total_q * NUM_HEADS * splits, D_NOPE, dtype=part_dtype, device=device),
            part_lse=torch.empty(total_q * NUM_HEADS * splits, dtype=torch.float32, device=device),
            splits_pow2=splits_pow2, block_dv=block_dv,
            combine_grid=(total_q * NUM_HEADS, D_NOPE // block_dv),
        )
    else:
        plan.update(part_out=None, part_lse=None)
    return plan


# ---------------------------------------------------------------------------------------------
# Launching with little host work.
# ---------------------------------------------------------------------------------------------
# The direct launch uses Triton internals (a compiled kernel's `[grid]` runner and
# `packed_metadata`, a JIT function's `arg_names`), measured on these Triton versions only; on any
# other, every launch takes the normal path. A runner that refuses its arguments (TypeError: the
# internals changed) turns the direct launch off for the rest of the process.
DIRECT_LAUNCH_TRITON = (("3", "6"),)          # (major, minor) versions where it was measured
_DIRECT_LAUNCH = {"on": tuple(triton.__version__.split(".")[:2]) in DIRECT_LAUNCH_TRITON}


def _specialization(arg):
    """What Triton specializes a compiled kernel on, for one argument: a tensor's dtype and
    16-byte alignment, an integer's value (only strides are passed as integers), else its type."""
    if isinstance(arg, torch.Tensor):
        return arg.dtype, arg.data_ptr() % 16 == 0
    return arg if isinstance(arg, int) else type(arg)


def _launch(plan: dict, kernel, grid: tuple, args: tuple, constexprs: dict, options: dict) -> None:
    """kernel[grid](*args, **constexprs, **options), minus most of Triton's per-launch host work.

    `kernel[grid](...)` binds and specializes every argument and looks the compiled kernel up on
    every call. The first launch for a plan and argument specialization goes that way (compiling
    on a miss) and keeps the compiled kernel Triton returns; later launches call it directly
    (measured on the H200 machine: 41 -> 28 us of host time per one-launch call). Under the CPU
    interpreter there is no compiled kernel, and every launch takes the normal path."""
    key = (kernel, tuple(_specialization(a) for a in args))
    direct = plan["direct"].get(key) if _DIRECT_LAUNCH["on"] else None
    if direct is not None:
        launch, constexpr_args = direct
        try:
            launch(*args, *constexpr_args)
            return
        except TypeError:                        # the internals changed: normal launches from now on
            _DIRECT_LAUNCH["on"] = False
            plan["direct"].clear()
    compiled = kernel[grid](*args, **constexprs, **options)
    if _DIRECT_LAUNCH["on"] and hasattr(compiled, "packed_metadata"):   # not the interpreter's result
        constexpr_args = tuple(constexprs[name] for name in kernel.arg_names[len(args):])
        plan["direct"][key] = (compiled[tuple(grid) + (1,) * (3 - len(grid))], constexpr_args)


# ==== end of shared code ====


def custom_kernel(data) -> torch.Tensor:
    q, kv_data, qo_indptr, kv_indptr, config = data
    packed, scales = kv_data["mxfp4"]
    packed = packed.view(torch.uint8)            # may arrive as a 4-bit x2 dtype
    scales = scales.view(torch.uint8)            # e8m0 bytes; (rows_padded, cols_padded), row stride used
    if scales.dim() != 2:
        scales = scales.reshape(scales.shape[0], -1)
    if scales.stride(-1) != 1:
        scales = scales.contiguous()             # the kernels step along a row's exponents one byte at a time
    total_q, total_kv, batch = q.shape[0], packed.shape[0], qo_indptr.shape[0] - 1
    if q.stride(-1) != 1:
        q = q.contiguous()
    sm_scale = config.get("sm_scale", 1.0 / math.sqrt(D_NOPE + D_ROPE))

    key = (batch, total_q, total_kv, q.device)
    plan = _PLANS.get(key)
    if plan is None:
        plan = _PLANS[key] = _make_plan(batch, total_q, total_kv, q.device)

    out = torch.empty(total_q, NUM_HEADS, D_NOPE, dtype=torch.bfloat16, device=q.device)
    if total_q == 0 or batch == 0:
        return out
    # The fp8 query's per-tensor scale (task.yml's precision contract), on the device: no sync.
    q_scale = q.abs().amax().float().clamp(min=1e-12) / E4M3_MAX if plan["qk_scaled"] else None
    if plan["sm90"]:
        if packed.data_ptr() % 16 or packed.stride(0) % 16 or packed.stride(-1) != 1:
            packed = packed.clone(memory_format=torch.contiguous_format)   # cp.async moves aligned 16-byte pieces
        args = (q, packed, scales, qo_indptr, kv_indptr, out, plan["part_out"], plan["part_lse"], sm_scale * LOG2E,
                q.stride(0), q.stride(1), packed.stride(0), scales.stride(0))
        _launch(plan, _mla_decode_sm90_ws_kernel, plan["grid"], args,
                dict(Q_GROUPS=plan["q_groups"], NUM_SPLITS=plan["splits"], BLOCK_N=plan["block_n"],
                     STAGES=plan["sm90"]["stages"], NBUF=plan["sm90"]["pv_buffers"], DECODE_ROWS=SM90_DECODE_ROWS,
                     DECODER_WARPS=SM90_DECODER_WARPS, DECODER_REGS=SM90_DECODER_REGS,
                     EARLY_RELEASE=SM90_EARLY_RELEASE), plan["options"])
    else:
        _launch(plan, _mla_decode_kernel, plan["grid"],
                (q, packed, scales, qo_indptr, kv_indptr, out, plan["part_out"], plan["part_lse"], q_scale,
                 sm_scale * LOG2E, q.stride(0), q.stride(1), packed.stride(0), scales.stride(0)),
                dict(NUM_HEADS=NUM_HEADS, D_NOPE=D_NOPE, D_ROPE=D_ROPE, MX_BLOCK=MX_BLOCK,
                     Q_ROWS=plan["q_rows"], Q_GROUPS=plan["q_groups"], NUM_SPLITS=plan["splits"],
                     BLOCK_N=plan["block_n"], DOT_DTYPE=plan["dot_dtype"],
                     PTX_DECODE=plan["ptx_decode"], QK_SCALED=plan["qk_scaled"]),
                plan["options"])
    if plan["splits"] > 1:
        _launch(plan, _combine_splits_kernel, plan["combine_grid"],
                (plan["part_out"], plan["part_lse"], out),
                dict(NUM_SPLITS=plan["splits"], SPLITS_POW2=plan["splits_pow2"], D_V=D_NOPE,
                     BLOCK_DV=plan["block_dv"]),
                {})
    return out
