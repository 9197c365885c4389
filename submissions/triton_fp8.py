"""MLA decode attention (DeepSeek absorbed form) over an fp8 KV cache, in Triton.

The problem
-----------
Every query row carries 16 heads of 576 dims (512 "latent" + 64 "rope"). All 16 heads attend to one
shared KV head: a cache row is 576 fp8 (e4m3) values with one per-tensor scale,
K = kv_fp8 * scale; the key is the whole row and the value is its first 512 dims. Per sequence b
(query rows qo_indptr[b]:qo_indptr[b+1], cache rows kv_indptr[b]:kv_indptr[b+1]):

    out[q, h] = softmax(q[q, h] . K^T * sm_scale) @ K[:, :512]

Why the kernel looks the way it does
------------------------------------
Decode attention reads the whole KV cache once and does little arithmetic per byte, so its speed
limit is memory bandwidth. Everything below serves "read every cache byte exactly once, with the
whole GPU busy":

* One program handles all 16 heads of a query row (the M=16 side of both matrix products), so a KV
  tile is loaded once and used by every head, and the 512 value dims are the first 512 key dims of
  the same tile. The tile is loaded as two 256-dim latent halves and the 64-dim rope part; each
  latent half feeds both q.K^T and P.V (into its own half of the output). Halves rather than one
  512-dim part: the compiled kernel spills less (8-26 spilled registers instead of 30-40) and
  runs 1-6% faster per shape (H200, BENCHMARKS.md session 4).
* Split-K ("flash decoding"): with few sequences there are too few programs to fill 132 SMs, so
  each sequence's KV range is cut into NUM_SPLITS chunks handled by separate programs. Each writes
  a partial result (its output normalised by its own softmax sum, and the log-sum-exp) to a cached
  fp32 workspace, and a small second kernel merges the splits. With enough sequences the plan
  uses one split and the first kernel writes the bf16 output directly (one launch of it; the
  Gluon path adds the |q| reduction before it). The split count comes from the SM count, the
  average KV length and a cap on the partials' traffic.
* With q_seq_len > 1 a program takes up to Q_ROWS_PER_PROGRAM query rows of a sequence at once
  (M = 16 x rows), so their shared KV rows are read once for all of them.
* Lengths are ragged and only the device knows them: the host plans from the average length
  total_kv / batch (no synchronisation), every program reads its own bounds from kv_indptr, and a
  program whose chunk lies past its sequence's end writes a neutral partial (lse = -inf, zeros).
* The fp8 scale is per tensor, so it never touches an element: q.K^T = (q.K8^T) * scale, folded
  with sm_scale * log2(e) into the one multiplier of the scores (online softmax in base 2), and
  P.V = (P.V8) * scale, applied once to each program's output. The scale is read on the device
  (no host synchronisation). Only kv_data["fp8"] is read: 1 byte per cache element, half the
  traffic of bf16.
* The matrix products take fp16 operands, not bf16: every e4m3 value is exact in fp16 and the
  conversion is one instruction per pair of values (cvt.rn.f16x2.e4m3x2 on NVIDIA), where bf16
  needs a detour through fp16 or fp32 (measured on the H200, same kernel otherwise: 97 -> 84 us
  geomean over the benchmark shapes). The query's bf16 values are exact in fp16 as long as
  |q| < 65504 (fp16's range; below 2**-14 they lose low bits, far below anything that moves a
  score); P in [0, 1] is rounded to fp16, which is finer than the bf16 rounding the task allows.
* Register double buffering: the raw fp8 bytes of the next tile are loaded before the current
  tile is converted, so a load is always in flight (measured 10-12% faster than leaving the
  conversion's input to Triton's pipeliner, even with 4 pipeline stages).
* One kernel source for GPU and for Triton's CPU interpreter. The interpreter computes 16-bit dots
  and 16-bit arithmetic wrongly, so the matrix-product operand type is a constexpr: fp16 on GPUs,
  fp32 in the interpreter. All softmax arithmetic is fp32 everywhere.

The launch plan (split count, grid, workspaces) depends only on the shapes and is cached per
(batch, total_q, total_kv, device), so a call is: look up the plan, allocate the output, launch.
Launches after the first go straight to the compiled kernel (`_launch`), skipping Triton's
per-launch argument binding: on the H200 machine's CPU a launch through `kernel[grid](...)` costs
~30 us of host time; with direct launches a whole call takes 40-62 us on the Gluon path (back to
back, BENCHMARKS.md session 18: two or three launches; about 14-22 us of it this file's own
Python). The direct launch relies on Triton internals, so it is on only for the Triton versions in
DIRECT_LAUNCH_TRITON; elsewhere every launch takes Triton's normal path.
The split combine, the launch plan and `_launch` are one block of code shared by the three
bundled Triton files (kept identical by lab/shared_code.py).

The sm_90 path (NVIDIA H100 / H200, Gluon)
------------------------------------------
`_mla_decode_sm90_kernel`, written in Gluon (Triton's explicit-layout dialect), turns the products
so that 64 cache rows are the M side of Hopper's warpgroup MMA: S^T = K8 . q8^T in fp8 straight from
the copied tile, and O^T += V^T . P in fp16 from the tile's 512 value dims, converted once to fp16 in
shared memory while the fp8 MMA runs (two value buffers, so a tile's P.V runs on over the next
tile's conversion). q is quantized per tensor, the precision contract's fp8-q path:
`_abs_max_kernel` finds amax|q| on the device, and the scale is amax times the fp32 reciprocal of
448, exactly as the reference's quantize_fp8 computes it on CUDA; the correctly rounded amax / 448
differs from it by an ulp for some amax, which moves q / scale across e4m3 rounding ties and gave
wrong outputs on a few percent of calls (BENCHMARKS.md sessions 17 and 18). It runs for one query
row per sequence on long sequences (LONG_KV) and wherever the sequences alone fill the GPU, two
programs per SM there (SM90_WIDE_LAUNCH); elsewhere the portable kernel. Checked on the H200:
lab/sm90_check.py (forced on for every one-row test case and ragged batches, 11 of 11),
lab/stress_check.py (0 of 900 calls wrong at 4x8k, 64x8k and 256x1k, fresh inputs each) and the
audited leaderboard.

What bounds it now (one H200, Triton 3.6; BENCHMARKS.md sessions 18 and 20)
---------------------------------------------------------------------------
The audited leaderboard of session 20 (call 4), us: 4x1k 14.1, 4x8k 25.5, 32x1k 24.1, 32x8k 73.4,
64x1k 36.6, 64x8k 128.2, 256x1k 82.7, 256x8k 423.9: geomean 56.6 (54.9 us of kernel time by Nsight
Compute; the file before its Gluon path 67.9 in the same run), level with triton_mxfp4.py. The
cache is read at 56% / 68% of the copy bandwidth at 64x8k / 256x8k. Nsight Compute on the Gluon kernel:
at 64x8k (one 4-warp program per SM, 255 registers, 218 KB of shared memory) 119.4 us, DRAM 53%
busy, L1/shared 62%, 0.23 warps eligible per scheduler, an instruction every 4.4 cycles per warp;
at 256x8k (two programs per SM) 408.8 us, DRAM 62%, L1/shared 70%, 0.35 eligible, 6.7 cycles.
Neither memory is saturated: one warpgroup runs the whole per-tile chain (wait for the copy, fp8
MMA, softmax, the values' fp16 conversion, P.V) with at most one other warpgroup per SM to hide
its latencies. What would lift it: warp specialization as in triton_mxfp4.py (converter warps
filling a ring of fp16 value tiles while an MMA warpgroup runs). The short shapes take the portable
kernel and the combine, launch- and latency-bound as in triton_bf16.py (4x1k: the split kernel 9.1
us, 64 programs of 4 warps, 0.19 eligible warps per scheduler, DRAM 6% busy).

The portable kernel (every other GPU, and the interpreter) is bound by shared memory (Nsight
Compute, 64x8k on the H200, BENCHMARKS.md session 4: L1/shared 76% busy, DRAM 33%): with M = 16
every warp re-reads the whole 16 x 576 query from shared memory per 32-row tile, 4 x 18 KB against
18 KB of cache bytes, and the converted fp16 tile goes through shared memory too.
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
    from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, warpgroup_mma,
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
    (2, False): dict(block_n=32, num_warps=8, num_stages=2),
    (2, True): dict(block_n=32, num_warps=8, num_stages=2),
    (4, False): dict(block_n=32, num_warps=8, num_stages=2),
    (4, True): dict(block_n=32, num_warps=8, num_stages=2),
}
LONG_KV = 4096               # average KV rows per sequence from which the "long" settings apply
Q_ROWS_PER_PROGRAM = 4       # most query rows (x16 heads) per program when q_seq_len > 1 ...
MULTI_ROW_MIN_BATCH = 1      # ... used only with at least this many sequences
MULTI_ROW_MIN_KV = 0         # ... and at least this average KV length; else 1 row per program
WARPS_PER_SM = 8             # warps resident on one SM at ~255 registers per thread (65536 / (255 * 32)):
                             # split-K fills SMs x (WARPS_PER_SM // num_warps) program slots once
MIN_TILES_PER_SPLIT = 2      # never split so finely that a chunk holds fewer tiles than this
MAX_SPLITS = 64
PARTIAL_DTYPE = "float32"    # split-K partial outputs: "float32", or "float16" (half their bytes; the
                             # log-sum-exps stay fp32); float16 was slower on the H200 (BENCHMARKS.md session 19)
PARTIAL_LIMIT = 4.0          # split-K partials (written + read) may add at most this many
                             # bytes per cache byte read; caps splits when q_seq_len > 1
KV_ROW_BYTES = 576           # one cache row: 576 fp8 values
COMBINE_BLOCK_ELEMS = 8192   # splits x value-dims handled by one combine program
CPU_PROGRAM_SLOTS = 8        # stands in for the SM count under the CPU interpreter
# On AMD GPUs (torch.version.hip) every shape uses this smaller tile (MI300/MI355X have 64-160 KB
# of LDS per CU) plus AMD-only compiler options. Not yet run on AMD hardware.
AMD_LAUNCH = dict(block_n=32, num_warps=4, num_stages=2)
AMD_LAUNCH_OPTIONS = {"matrix_instr_nonkdim": 16}
# NVIDIA sm_90 (H100 / H200) with one query row per sequence: the Gluon kernel below (warpgroup MMAs
# on 64-row tiles), on the Triton versions where it was measured; everywhere else the portable one.
SM90_GLUON = True
SM90_TRITON = (("3", "6"),)  # (major, minor) versions where the Gluon kernel was checked and timed
SM90_LAUNCH = dict(block_n=64, num_warps=4, num_stages=1, programs_per_sm=1,   # 218 KB shared memory
                   stages=2, pv_buffers=2)
SM90_WIDE_LAUNCH = dict(block_n=64, num_warps=4, num_stages=1, programs_per_sm=2,  # 114 KB: 2 programs per SM
                        stages=1, pv_buffers=1)
SM90_WIDE = True             # the two-per-SM launch when the sequences alone fill every SM
SM90_SHORT_KV = False        # also for a few short sequences (session 16: slower at 4x1k and 32x1k)
# stages: fp8 tiles in flight (cp.async), 36 KB of shared memory each; pv_buffers: fp16 value tiles
# (64 KB each), 2 lets a tile's P.V run on while the next tile converts.
AMAX_BLOCK = 2048            # |q| elements per step of one program of `_abs_max_kernel` ...
AMAX_PROGRAMS = 64           # ... and at most this many programs (partial maxima)

NUM_HEADS = 16
D_NOPE = 512                 # latent dims: the value, and the first part of the key
D_ROPE = 64                  # rope dims: the rest of the key
LOG2E = 1.4426950408889634


@triton.jit
def _load_fp8_tile(kv_ptr, kv_row, kv_end, offs_half, offs_rope, stride_kv_row, HALF: tl.constexpr):
    """Raw fp8 bytes of cache rows kv_row (rows at or past kv_end read as 0): latent halves and rope."""
    n_ok = (kv_row < kv_end)[:, None]
    kv_base = kv_ptr + kv_row[:, None] * stride_kv_row
    return (tl.load(kv_base + offs_half[None, :], mask=n_ok, other=0.0),
            tl.load(kv_base + HALF + offs_half[None, :], mask=n_ok, other=0.0),
            tl.load(kv_base + offs_rope[None, :], mask=n_ok, other=0.0))


# ---------------------------------------------------------------------------------------------
# Kernel 1: attention of a group of query rows over one chunk of its sequence's KV rows.
# ---------------------------------------------------------------------------------------------
@triton.jit
def _mla_decode_kernel(
    q_ptr, kv_ptr, qo_indptr_ptr, kv_indptr_ptr,
    out_ptr, part_out_ptr, part_lse_ptr,
    kv_scale_ptr, qk_scale,                      # per-tensor fp8 scale; sm_scale * log2(e)
    stride_q_row, stride_q_head, stride_kv_row,
    NUM_HEADS: tl.constexpr, D_NOPE: tl.constexpr, D_ROPE: tl.constexpr,
    Q_ROWS: tl.constexpr, Q_GROUPS: tl.constexpr,
    NUM_SPLITS: tl.constexpr, BLOCK_N: tl.constexpr,
    DOT_DTYPE: tl.constexpr,
):
    M: tl.constexpr = Q_ROWS * NUM_HEADS
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
    HALF: tl.constexpr = D_NOPE // 2
    offs_half = tl.arange(0, HALF)
    offs_rope = D_NOPE + tl.arange(0, D_ROPE)
    offs_n = tl.arange(0, BLOCK_N)
    kv_scale = tl.load(kv_scale_ptr)
    score_scale = qk_scale * kv_scale

    # Query rows of this sequence, Q_ROWS at a time; groups interleave so that uniform q_seq_len
    # <= Q_ROWS * Q_GROUPS means exactly one pass per program.
    q_start = tl.load(qo_indptr_ptr + seq)
    q_end = tl.load(qo_indptr_ptr + seq + 1)
    for q0 in range(q_start + group * Q_ROWS, q_end, Q_GROUPS * Q_ROWS):
        q_row = q0 + offs_m // NUM_HEADS
        head = offs_m % NUM_HEADS
        row_ok = q_row < q_end
        q_base = q_ptr + q_row[:, None] * stride_q_row + head[:, None] * stride_q_head
        q_lo = tl.load(q_base + offs_half[None, :], mask=row_ok[:, None], other=0.0).to(DOT_DTYPE)
        q_hi = tl.load(q_base + HALF + offs_half[None, :], mask=row_ok[:, None], other=0.0).to(DOT_DTYPE)
        q_rope = tl.load(q_base + offs_rope[None, :], mask=row_ok[:, None], other=0.0).to(DOT_DTYPE)

        m_i = tl.full([M], float("-inf"), tl.float32)    # running max (log2 units)
        l_i = tl.zeros([M], tl.float32)                  # running softmax denominator
        acc_lo = tl.zeros([M, HALF], tl.float32)         # running numerator . V, value dims 0-255
        acc_hi = tl.zeros([M, HALF], tl.float32)         # ... and 256-511

        # Register double buffering: the raw fp8 bytes of the next tile are requested before the
        # current tile is converted and used, so a load is always in flight.
        raw_lo, raw_hi, raw_rope = _load_fp8_tile(kv_ptr, chunk_start + offs_n, chunk_end, offs_half, offs_rope,
                                                  stride_kv_row, HALF)
        for n0 in range(chunk_start, chunk_end, BLOCK_N):
            n_ok = n0 + offs_n < chunk_end
            next_lo, next_hi, next_rope = _load_fp8_tile(kv_ptr, n0 + BLOCK_N + offs_n, chunk_end, offs_half,
                                                         offs_rope, stride_kv_row, HALF)
            # The fp8 tile, converted once: each latent half serves as key part and as value.
            k_lo = raw_lo.to(DOT_DTYPE)
            k_hi = raw_hi.to(DOT_DTYPE)
            k_rope = raw_rope.to(DOT_DTYPE)

            s = tl.dot(q_lo, tl.trans(k_lo))
            s = tl.dot(q_hi, tl.trans(k_hi), s)
            s = tl.dot(q_rope, tl.trans(k_rope), s)
            s = tl.where(n_ok[None, :], s * score_scale, float("-inf"))

            m_new = tl.maximum(m_i, tl.max(s, 1))
            alpha = tl.exp2(m_i - m_new)
            p = tl.exp2(s - m_new[:, None])
            l_i = l_i * alpha + tl.sum(p, 1)
            p16 = p.to(DOT_DTYPE)
            acc_lo = tl.dot(p16, k_lo, acc_lo * alpha[:, None])
            acc_hi = tl.dot(p16, k_hi, acc_hi * alpha[:, None])
            m_i = m_new
            raw_lo, raw_hi, raw_rope = next_lo, next_hi, next_rope

        # A program with no KV rows keeps l = 0: its output is 0 and its lse is -inf.
        has_rows = l_i > 0.0
        norm = (kv_scale / tl.where(has_rows, l_i, 1.0))[:, None]
        out_row = q_row * NUM_HEADS + head           # rows of the contiguous (total_q*16, .) output
        if NUM_SPLITS == 1:
            o_ptrs = out_ptr + out_row[:, None] * D_NOPE + offs_half[None, :]
            tl.store(o_ptrs, (acc_lo * norm).to(out_ptr.dtype.element_ty), mask=row_ok[:, None])
            tl.store(o_ptrs + HALF, (acc_hi * norm).to(out_ptr.dtype.element_ty), mask=row_ok[:, None])
        else:
            part_row = out_row * NUM_SPLITS + split
            lse = tl.where(has_rows, m_i + tl.log2(tl.where(has_rows, l_i, 1.0)), float("-inf"))
            tl.store(part_lse_ptr + part_row, lse, mask=row_ok)
            p_ptrs = part_out_ptr + part_row[:, None] * D_NOPE + offs_half[None, :]
            tl.store(p_ptrs, acc_lo * norm, mask=row_ok[:, None])
            tl.store(p_ptrs + HALF, acc_hi * norm, mask=row_ok[:, None])



# ---------------------------------------------------------------------------------------------
# Kernel 1, sm_90 fast path (Gluon): the same attention as `_mla_decode_kernel` for one query row
# per program, with the products turned so that the 64 KV rows of a tile are the M side of
# Hopper's warpgroup MMA (M = 16 heads is below its minimum of 64):
#     S^T (64 x 16) = K8 (64 x 576) . q8^T          (fp8 x fp8, straight from the copied tile)
#     O^T (512 x 16) += V^T (512 x 64) . P (64 x 16)  (fp16: V converted once, in shared memory)
# q.K^T in fp8 takes q quantized per tensor (scale = amax|q| / 448, the precision contract's fp8-q
# path): `_abs_max_kernel` reduces |q| first. P.V needs 16-bit operands (P may not be rounded to
# fp8, and fp8 MMAs read V^T only K-major, which the cache's row layout is not), so each tile's 512
# value dims are converted to fp16 once, while the q.K^T MMA runs. The raw fp8 tiles arrive by
# cp.async, `stages` of them in flight (the launch's settings, SM90_LAUNCH / SM90_WIDE_LAUNCH).
# ---------------------------------------------------------------------------------------------
@triton.jit
def _abs_max_kernel(x_ptr, parts_ptr, n, BLOCK: tl.constexpr):
    """parts[program] = max |x| over this program's share of the n elements of x."""
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(tl.program_id(0) * BLOCK, n, tl.num_programs(0) * BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc = tl.maximum(acc, tl.abs(tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)))
    tl.store(parts_ptr + tl.program_id(0), tl.max(acc, 0))


if gluon is not None:
    @gluon.jit
    def _sm90_issue_tile(k8_smem, r8_smem, kv_ptr, row0, chunk_end, stride_kv_row,
                         BLOCK_N: gl.constexpr, lo_l: gl.constexpr, rope_l: gl.constexpr):
        """Start copying cache rows row0 .. row0 + BLOCK_N (rows at or past chunk_end read as 0)."""
        rows = row0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, lo_l))
        cols = gl.arange(0, 512, layout=gl.SliceLayout(0, lo_l))
        gl_async_copy.async_copy_global_to_shared(
            k8_smem, kv_ptr + rows[:, None] * stride_kv_row + cols[None, :], mask=(rows < chunk_end)[:, None])
        rrows = row0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, rope_l))
        rcols = 512 + gl.arange(0, 64, layout=gl.SliceLayout(0, rope_l))
        gl_async_copy.async_copy_global_to_shared(
            r8_smem, kv_ptr + rrows[:, None] * stride_kv_row + rcols[None, :], mask=(rrows < chunk_end)[:, None])

    @gluon.jit
    def _mla_decode_sm90_kernel(
        q_ptr, kv_ptr, qo_indptr_ptr, kv_indptr_ptr,
        out_ptr, part_out_ptr, part_lse_ptr,
        kv_scale_ptr, qk_scale, q_amax_ptr, q_amax_parts,
        stride_q_row, stride_q_head, stride_kv_row,
        NUM_SPLITS: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr, W: gl.constexpr,
        AMAX_PARTS: gl.constexpr, PV_BUFFERS: gl.constexpr,
    ):
        H: gl.constexpr = 16                      # heads
        DV: gl.constexpr = 512                    # latent dims (value, first part of the key)
        DR: gl.constexpr = 64                     # rope dims
        SLICE: gl.constexpr = 256                 # value dims converted at a time (bounds registers)
        FP8_MAX: gl.constexpr = 448.0

        # Register layouts (W warps). Copies: 16 bytes per thread, a quarter warp per 128-byte row
        # segment (one swizzle period of the shared layouts: no bank conflicts). Conversion: 8
        # values per thread, a warp along one row. MMA accumulators: S^T with 4 warps down the
        # tile's rows (and W // 4 across the heads), O^T with W warps down the value dims.
        lo_l: gl.constexpr = gl.BlockedLayout([1, 16], [1, 32], [W, 1], [1, 0])     # [BLOCK_N, 512] fp8
        rope_l: gl.constexpr = gl.BlockedLayout([1, 16], [8, 4], [W, 1], [1, 0])    # [BLOCK_N, 64] fp8
        cv_l: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [W, 1], [1, 0])      # [BLOCK_N, SLICE]
        q_l: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [W, 1], [1, 0])       # [16, 512] bf16
        qr_l: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [W, 1], [1, 0])       # [16, 64] bf16
        s_l: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, W // 4],
                                                      instr_shape=[16, 64 // W, 32])
        o_l: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[W, 1],
                                                      instr_shape=[16, 16, 16])
        parts_l: gl.constexpr = gl.BlockedLayout([1], [32], [W], [0])

        fp8: gl.constexpr = kv_ptr.dtype.element_ty
        k8_smem = gl.allocate_shared_memory(fp8, [STAGES, BLOCK_N, DV],
                                            gl.NVMMASharedLayout.get_default_for([BLOCK_N, DV], fp8))
        r8_smem = gl.allocate_shared_memory(fp8, [STAGES, BLOCK_N, DR],
                                            gl.NVMMASharedLayout.get_default_for([BLOCK_N, DR], fp8))
        q8_smem = gl.allocate_shared_memory(fp8, [H, DV], gl.NVMMASharedLayout.get_default_for([H, DV], fp8))
        qr8_smem = gl.allocate_shared_memory(fp8, [H, DR], gl.NVMMASharedLayout.get_default_for([H, DR], fp8))
        v16_smem = gl.allocate_shared_memory(gl.float16, [PV_BUFFERS, BLOCK_N, DV],
                                             gl.NVMMASharedLayout.get_default_for([BLOCK_N, DV], gl.float16))
        p_smem = gl.allocate_shared_memory(gl.float16, [PV_BUFFERS, H, BLOCK_N],
                                           gl.NVMMASharedLayout.get_default_for([H, BLOCK_N], gl.float16))

        seq = gl.program_id(0)
        split = gl.program_id(1)
        kv_start = gl.load(kv_indptr_ptr + seq)
        kv_end = gl.load(kv_indptr_ptr + seq + 1)
        chunk = gl.cdiv(gl.cdiv(kv_end - kv_start, NUM_SPLITS), BLOCK_N) * BLOCK_N
        chunk_start = kv_start + split * chunk
        chunk_end = gl.minimum(chunk_start + chunk, kv_end)
        n_tiles = gl.cdiv(chunk_end - chunk_start, BLOCK_N)
        kv_scale = gl.load(kv_scale_ptr)

        # q's per-tensor fp8 scale, from the partial maxima of |q| (as quantize_fp8 computes it).
        part = gl.arange(0, AMAX_PARTS, layout=parts_l)
        amax = gl.max(gl.load(q_amax_ptr + part, mask=part < q_amax_parts, other=0.0), 0)
        # amax * fp32(1 / 448), not amax / 448: on CUDA, torch computes quantize_fp8's amax / fp8_max
        # (a CPU scalar divisor) as a multiply by the rounded reciprocal, up to 1 ulp from the
        # correctly rounded quotient; with the other rounding, q / scale lands on e4m3 rounding ties
        # differently for some amax values and whole calls fail the check (BENCHMARKS.md, session 17).
        q_scale = gl.maximum(amax, 1e-12) * (1.0 / FP8_MAX)
        score_scale = qk_scale * kv_scale * q_scale

        q_start = gl.load(qo_indptr_ptr + seq)
        q_end = gl.load(qo_indptr_ptr + seq + 1)
        for q_row in range(q_start, q_end):
            qh = gl.arange(0, H, layout=gl.SliceLayout(1, q_l))
            qd = gl.arange(0, DV, layout=gl.SliceLayout(0, q_l))
            q_lo = gl.load(q_ptr + q_row * stride_q_row + qh[:, None] * stride_q_head + qd[None, :])
            q8_smem.store(gl.minimum(gl.maximum(gl.div_rn(q_lo.to(gl.float32), q_scale), -FP8_MAX),
                                     FP8_MAX).to(fp8))
            rh = gl.arange(0, H, layout=gl.SliceLayout(1, qr_l))
            rd = DV + gl.arange(0, DR, layout=gl.SliceLayout(0, qr_l))
            q_rope = gl.load(q_ptr + q_row * stride_q_row + rh[:, None] * stride_q_head + rd[None, :])
            qr8_smem.store(gl.minimum(gl.maximum(gl.div_rn(q_rope.to(gl.float32), q_scale), -FP8_MAX),
                                      FP8_MAX).to(fp8))

            m_i = gl.full([H], float("-inf"), gl.float32, layout=gl.SliceLayout(0, s_l))   # log2 units
            l_acc = gl.zeros([BLOCK_N, H], gl.float32, layout=s_l)   # softmax sums, reduced after the loop
            acc = warpgroup_mma_init(gl.zeros([DV, H], gl.float32, layout=o_l))          # O^T

            # Tiles t .. t + STAGES - 1 are in flight at the top of iteration t (one copy group each);
            # tile t + STAGES is requested into tile t's buffer as soon as tile t has been read.
            for t in gl.static_range(STAGES):
                _sm90_issue_tile(k8_smem.index(t), r8_smem.index(t), kv_ptr, chunk_start + t * BLOCK_N,
                                 chunk_end, stride_kv_row, BLOCK_N, lo_l, rope_l)
                gl_async_copy.commit_group()
            for t in range(n_tiles):
                gl_async_copy.wait_group(STAGES - 1)      # this thread's copies of tile t landed ...
                fence_async_shared()
                gl.thread_barrier()                       # ... and every other thread's
                stage = t % STAGES
                k8 = k8_smem.index(stage)
                v16 = v16_smem.index(t % PV_BUFFERS)
                p_buf = p_smem.index(t % PV_BUFFERS)

                # q.K^T on the tensor cores (and, with two buffers, the previous tile's P.V) while
                # this tile's value dims are converted to fp16. MMAs complete in order: the wait for
                # q.K^T also ends the previous P.V, whose buffers are then free for the next tile.
                s = warpgroup_mma(k8, q8_smem.permute((1, 0)), gl.zeros([BLOCK_N, H], gl.float32, layout=s_l),
                                  use_acc=False, is_async=True)
                s = warpgroup_mma(r8_smem.index(stage), qr8_smem.permute((1, 0)), s, is_async=True)
                for c in gl.static_range(DV // SLICE):
                    raw = k8.slice(c * SLICE, SLICE, dim=1).load(cv_l)
                    v16.slice(c * SLICE, SLICE, dim=1).store(raw.to(gl.float16))
                s, acc = warpgroup_mma_wait(num_outstanding=0, deps=(s, acc))

                rows = chunk_start + t * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, s_l))
                s = gl.where((rows < chunk_end)[:, None], s * score_scale, float("-inf"))
                m_new = gl.maximum(m_i, gl.max(s, 0))
                alpha = gl.exp2(m_i - m_new)
                p = gl.exp2(s - m_new[None, :])
                l_acc = l_acc * alpha[None, :] + p
                m_i = m_new
                p_buf.store(gl.permute(p.to(gl.float16), [1, 0]))
                fence_async_shared()
                gl.thread_barrier()                       # every warp's v16 and P stores, and reads of tile t
                _sm90_issue_tile(k8, r8_smem.index(stage), kv_ptr, chunk_start + (t + STAGES) * BLOCK_N, chunk_end,
                                 stride_kv_row, BLOCK_N, lo_l, rope_l)
                gl_async_copy.commit_group()
                acc = warpgroup_mma(v16.permute((1, 0)), p_buf.permute((1, 0)),
                                    acc * gl.convert_layout(alpha, gl.SliceLayout(0, o_l))[None, :], is_async=True)
                if PV_BUFFERS == 1:
                    acc = warpgroup_mma_init(warpgroup_mma_wait(num_outstanding=0, deps=(acc,)))
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
            gl_async_copy.wait_group(0)
            gl.thread_barrier()
            l_i = gl.sum(l_acc, 0)

            has_rows = l_i > 0.0                          # a program with no KV rows: output 0, lse -inf
            norm = gl.convert_layout(kv_scale / gl.where(has_rows, l_i, 1.0), gl.SliceLayout(0, o_l))
            o = acc * norm[None, :]                      # stored from the MMA layout: no scratch memory
            od = gl.arange(0, DV, layout=gl.SliceLayout(1, o_l))
            out_row = q_row * H + gl.arange(0, H, layout=gl.SliceLayout(0, o_l))
            if NUM_SPLITS == 1:
                gl.store(out_ptr + out_row[None, :] * DV + od[:, None], o.to(out_ptr.dtype.element_ty))
            else:
                part_row = out_row * NUM_SPLITS + split
                gl.store(part_out_ptr + part_row[None, :] * DV + od[:, None], o.to(part_out_ptr.dtype.element_ty))
                lse = gl.where(has_rows, m_i + gl.log2(gl.where(has_rows, l_i, 1.0)), float("-inf"))
                lse_row = q_row * H + gl.arange(0, H, layout=gl.SliceLayout(0, s_l))
                gl.store(part_lse_ptr + lse_row * NUM_SPLITS + split, lse)


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
        return SM90_WIDE_LAUNCH if SM90_WIDE and fills_gpu else SM90_LAUNCH
    return AMD_LAUNCH if amd else LAUNCH[(q_rows, long_kv)]


def _format_plan(device: torch.device, interpreted: bool, amd: bool, launch: dict) -> dict:
    """This file's own entries of a launch plan; the shared `_make_plan` below adds them."""
    sm90 = launch is SM90_LAUNCH or launch is SM90_WIDE_LAUNCH
    return dict(dot_dtype=tl.float32 if interpreted else tl.float16, sm90=launch if sm90 else None)


def _amax_parts(plan: dict, numel: int, device: torch.device) -> tuple:
    """(programs, buffer) of `_abs_max_kernel` for a q of numel elements, cached in the plan."""
    if "amax" not in plan:
        programs = max(1, min(AMAX_PROGRAMS, triton.cdiv(numel, AMAX_BLOCK)))
        plan["amax"] = (programs, torch.empty(programs, dtype=torch.float32, device=device))
    return plan["amax"]


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
    kv, kv_scale = kv_data["fp8"]
    total_q, total_kv, batch = q.shape[0], kv.shape[0], qo_indptr.shape[0] - 1
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
    if plan["sm90"]:
        q = q.contiguous()                       # the |q| reduction reads it as one flat range
        if kv.data_ptr() % 16 or kv.stride(0) % 16 or kv.stride(-1) != 1:
            kv = kv.clone(memory_format=torch.contiguous_format)   # cp.async moves aligned 16-byte pieces
        programs, amax = _amax_parts(plan, q.numel(), q.device)
        _launch(plan, _abs_max_kernel, (programs,), (q, amax, q.numel()), dict(BLOCK=AMAX_BLOCK), {})
        _launch(plan, _mla_decode_sm90_kernel, plan["grid"],
                (q, kv, qo_indptr, kv_indptr, out, plan["part_out"], plan["part_lse"], kv_scale,
                 sm_scale * LOG2E, amax, programs, q.stride(0), q.stride(1), kv.stride(0)),
                dict(NUM_SPLITS=plan["splits"], BLOCK_N=plan["block_n"], STAGES=plan["sm90"]["stages"],
                     W=plan["options"]["num_warps"], AMAX_PARTS=triton.next_power_of_2(programs),
                     PV_BUFFERS=plan["sm90"]["pv_buffers"]),
                plan["options"])
    else:
        _launch(plan, _mla_decode_kernel, plan["grid"],
                (q, kv, qo_indptr, kv_indptr, out, plan["part_out"], plan["part_lse"], kv_scale,
                 sm_scale * LOG2E, q.stride(0), q.stride(1), kv.stride(0)),
                dict(NUM_HEADS=NUM_HEADS, D_NOPE=D_NOPE, D_ROPE=D_ROPE, Q_ROWS=plan["q_rows"],
                     Q_GROUPS=plan["q_groups"], NUM_SPLITS=plan["splits"], BLOCK_N=plan["block_n"],
                     DOT_DTYPE=plan["dot_dtype"]),
                plan["options"])
    if plan["splits"] > 1:
        _launch(plan, _combine_splits_kernel, plan["combine_grid"],
                (plan["part_out"], plan["part_lse"], out),
                dict(NUM_SPLITS=plan["splits"], SPLITS_POW2=plan["splits_pow2"], D_V=D_NOPE,
                     BLOCK_DV=plan["block_dv"]),
                {})
    return out
