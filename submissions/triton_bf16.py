"""MLA decode attention (DeepSeek absorbed form) over a bf16 KV cache, in Triton.

The problem
-----------
Every query row carries 16 heads of 576 dims (512 "latent" + 64 "rope"). All 16 heads attend to one
shared KV head: a cache row is 576 bf16 values, the key is the whole row and the value is its first
512 dims. Per sequence b (query rows qo_indptr[b]:qo_indptr[b+1], cache rows
kv_indptr[b]:kv_indptr[b+1]):

    out[q, h] = softmax(q[q, h] . K^T * sm_scale) @ K[:, :512]

Why the kernel looks the way it does
------------------------------------
Decode attention reads the whole KV cache once and does little arithmetic per byte, so its speed
limit is memory bandwidth. Everything below serves "read every cache byte exactly once, with the
whole GPU busy":

* One program handles all 16 heads of a query row (the M=16 side of both matrix products), so a KV
  tile is loaded once and used by every head, and the 512 value dims are the first 512 key dims of
  the same tile: the tile is loaded as a 512-dim part and a 64-dim part, and the 512 part feeds
  both q.K^T and P.V.
* Split-K ("flash decoding"): with few sequences there are too few programs to fill 132 SMs, so
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
  fp32 in the interpreter. All softmax arithmetic is fp32 everywhere.

The launch plan (split count, grid, workspaces) depends only on the shapes and is cached per
(batch, total_q, total_kv, device), so a call is: look up the plan, allocate the output, launch.
Launches after the first go straight to the compiled kernel (`_launch`), skipping Triton's
per-launch argument binding: on the H200 machine's CPU a launch through `kernel[grid](...)` costs
~30 us of host time; with direct launches a whole one-launch call takes 23-37 us (back to back,
BENCHMARKS.md session 18; about 9 us of it this file's own Python). The direct launch relies on
Triton internals, so it is on only for the Triton versions in DIRECT_LAUNCH_TRITON; elsewhere
every launch takes Triton's normal path.
The split combine, the launch plan and `_launch` are one block of code shared by the three
bundled Triton files (kept identical by lab/shared_code.py).

What bounds it now (one H200, Triton 3.6; the harness's audited leaderboard, BENCHMARKS.md session
20, call 4; profiles from sessions 18 and 19): geomean over the 8 benchmark shapes 59.9 us timed,
58.4 us of kernel time by Nsight Compute; 64 x 8192 in 157.5 us and 256 x 8192 in 573.7 us, 91% and
100% of the 4.2 TB/s copy rate: the long shapes are bound by memory bandwidth. The short ones are
not: at 4 x 1024 (13.8 us) the split kernel takes 7.8 us and the combine about 5. The split kernel's 128 programs (one 32-row tile each,
4 warps, one per SM) wait on latency: 0.14 warps eligible per scheduler, one instruction per 6.8
cycles per warp, 45% of those gaps on global loads, DRAM 13% busy. At 256 x 1024 (two waves of one
8-warp program per SM) DRAM is 74% busy and a third of the gaps wait on shared memory. What would
lift the short shapes: one launch instead of two (the last program of a sequence merging its
splits), which also keeps the profiler's per-kernel sum equal to the timed call. (More warps on the
same 32-row tile made 4 x 1024 slower: 14.4 against 13.2 us.)
"""

import math
import os

import torch
import triton
import triton.language as tl

# ---------------------------------------------------------------------------------------------
# Tuning knobs (adjust here; everything below reads them).
# ---------------------------------------------------------------------------------------------
# Measured on one H200 with Triton 3.6 (see the module docstring); block_n >= 16 (the K dim of
# P.V), and block_n * 576 * element size * num_stages must fit in shared memory.
LAUNCH = {                   # (query rows per program, long sequences?) -> tile and launch shape
    (1, False): dict(block_n=32, num_warps=4, num_stages=2),
    (1, True): dict(block_n=64, num_warps=8, num_stages=3),
    (2, False): dict(block_n=32, num_warps=8, num_stages=2),
    (2, True): dict(block_n=64, num_warps=8, num_stages=2),
    (4, False): dict(block_n=32, num_warps=8, num_stages=2),
    (4, True): dict(block_n=64, num_warps=8, num_stages=2),
}
LONG_KV = 4096               # average KV rows per sequence from which the "long" settings apply
SHORT_TILE_ROWS_PER_SM = 128 # ... or, with one query row per program, cache rows read per SM (_file_launch)
Q_ROWS_PER_PROGRAM = 4       # most query rows (x16 heads) per program when q_seq_len > 1 ...
MULTI_ROW_MIN_BATCH = 1      # ... used only with at least this many sequences
MULTI_ROW_MIN_KV = 0         # ... and at least this average KV length; else 1 row per program
WARPS_PER_SM = 8             # warps resident on one SM at ~255 registers per thread (65536 / (255 * 32)):
                             # split-K fills SMs x (WARPS_PER_SM // num_warps) program slots once
MIN_TILES_PER_SPLIT = 1      # never split so finely that a chunk holds fewer tiles than this
MAX_SPLITS = 64
PARTIAL_DTYPE = "float32"    # split-K partial outputs: "float32", or "float16" (half their bytes; the
                             # log-sum-exps stay fp32); float16 was slower on the H200 (BENCHMARKS.md session 19)
PARTIAL_LIMIT = 4.0          # split-K partials (written + read) may add at most this many
                             # bytes per cache byte read; caps splits when q_seq_len > 1
KV_ROW_BYTES = 1152          # one cache row: 576 bf16 values
COMBINE_BLOCK_ELEMS = 8192   # splits x value-dims handled by one combine program
CPU_PROGRAM_SLOTS = 8        # stands in for the SM count under the CPU interpreter
# On AMD GPUs (torch.version.hip) every shape uses this smaller tile (MI300/MI355X have 64-160 KB
# of LDS per CU) plus AMD-only compiler options. Not yet run on AMD hardware.
AMD_LAUNCH = dict(block_n=32, num_warps=4, num_stages=2)
AMD_LAUNCH_OPTIONS = {"matrix_instr_nonkdim": 16}

NUM_HEADS = 16
D_NOPE = 512                 # latent dims: the value, and the first part of the key
D_ROPE = 64                  # rope dims: the rest of the key
LOG2E = 1.4426950408889634


# ---------------------------------------------------------------------------------------------
# Kernel 1: attention of a group of query rows over one chunk of its sequence's KV rows.
# ---------------------------------------------------------------------------------------------
@triton.jit
def _mla_decode_kernel(
    q_ptr, kv_ptr, qo_indptr_ptr, kv_indptr_ptr,
    out_ptr, part_out_ptr, part_lse_ptr,
    qk_scale,                                    # sm_scale * log2(e)
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
    offs_nope = tl.arange(0, D_NOPE)
    offs_rope = D_NOPE + tl.arange(0, D_ROPE)
    offs_n = tl.arange(0, BLOCK_N)

    # Query rows of this sequence, Q_ROWS at a time; groups interleave so that uniform q_seq_len
    # <= Q_ROWS * Q_GROUPS means exactly one pass per program.
    q_start = tl.load(qo_indptr_ptr + seq)
    q_end = tl.load(qo_indptr_ptr + seq + 1)
    for q0 in range(q_start + group * Q_ROWS, q_end, Q_GROUPS * Q_ROWS):
        q_row = q0 + offs_m // NUM_HEADS
        head = offs_m % NUM_HEADS
        row_ok = q_row < q_end
        q_base = q_ptr + q_row[:, None] * stride_q_row + head[:, None] * stride_q_head
        q_nope = tl.load(q_base + offs_nope[None, :], mask=row_ok[:, None], other=0.0).to(DOT_DTYPE)
        q_rope = tl.load(q_base + offs_rope[None, :], mask=row_ok[:, None], other=0.0).to(DOT_DTYPE)

        m_i = tl.full([M], float("-inf"), tl.float32)    # running max (log2 units)
        l_i = tl.zeros([M], tl.float32)                  # running softmax denominator
        acc = tl.zeros([M, D_NOPE], tl.float32)          # running numerator . V

        for n0 in range(chunk_start, chunk_end, BLOCK_N):
            kv_row = n0 + offs_n
            n_ok = kv_row < chunk_end
            kv_base = kv_ptr + kv_row[:, None] * stride_kv_row
            # One load of the tile: its 512 latent dims serve as key part and as value.
            k_nope = tl.load(kv_base + offs_nope[None, :], mask=n_ok[:, None], other=0.0).to(DOT_DTYPE)
            k_rope = tl.load(kv_base + offs_rope[None, :], mask=n_ok[:, None], other=0.0).to(DOT_DTYPE)

            s = tl.dot(q_nope, tl.trans(k_nope))
            s = tl.dot(q_rope, tl.trans(k_rope), s)
            s = tl.where(n_ok[None, :], s * qk_scale, float("-inf"))

            m_new = tl.maximum(m_i, tl.max(s, 1))
            alpha = tl.exp2(m_i - m_new)
            p = tl.exp2(s - m_new[:, None])
            l_i = l_i * alpha + tl.sum(p, 1)
            acc = tl.dot(p.to(DOT_DTYPE), k_nope, acc * alpha[:, None])
            m_i = m_new

        # A program with no KV rows keeps l = 0: its output is 0 and its lse is -inf.
        has_rows = l_i > 0.0
        out = acc / tl.where(has_rows, l_i, 1.0)[:, None]
        out_row = q_row * NUM_HEADS + head           # rows of the contiguous (total_q*16, .) output
        if NUM_SPLITS == 1:
            o_ptrs = out_ptr + out_row[:, None] * D_NOPE + offs_nope[None, :]
            tl.store(o_ptrs, out.to(out_ptr.dtype.element_ty), mask=row_ok[:, None])
        else:
            part_row = out_row * NUM_SPLITS + split
            lse = tl.where(has_rows, m_i + tl.log2(tl.where(has_rows, l_i, 1.0)), float("-inf"))
            tl.store(part_lse_ptr + part_row, lse, mask=row_ok)
            p_ptrs = part_out_ptr + part_row[:, None] * D_NOPE + offs_nope[None, :]
            tl.store(p_ptrs, out, mask=row_ok[:, None])


def _file_launch(q_rows: int, avg_kv: float, programs: int, sms: int, device: torch.device,
                 interpreted: bool, amd: bool) -> dict:
    """This file's tile and launch shape for a plan (the shared `_make_plan` below asks): `programs`
    query-row groups of `avg_kv` cache rows on average, `sms` SMs (0 under the interpreter)."""
    # One query row per program: the long settings also when the programs read SHORT_TILE_ROWS_PER_SM
    # cache rows or more per SM (at 32-256 x 1k: 23.1 / 32.1 / 86.1 against 25.6 / 36.9 / 93.4 us; at
    # 4 x 1k, 31 rows per SM, 14.1 against 13.2; BENCHMARKS.md session 18).
    long_kv = avg_kv >= LONG_KV or (q_rows == 1 and avg_kv * programs >= SHORT_TILE_ROWS_PER_SM * sms > 0)
    return AMD_LAUNCH if amd else LAUNCH[(q_rows, long_kv)]


def _format_plan(device: torch.device, interpreted: bool, amd: bool, launch: dict) -> dict:
    """This file's own entries of a launch plan; the shared `_make_plan` below adds them."""
    return dict(dot_dtype=tl.float32 if interpreted else tl.bfloat16)


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
    kv = kv_data["bf16"]
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
    _launch(plan, _mla_decode_kernel, plan["grid"],
            (q, kv, qo_indptr, kv_indptr, out, plan["part_out"], plan["part_lse"], sm_scale * LOG2E,
             q.stride(0), q.stride(1), kv.stride(0)),
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
