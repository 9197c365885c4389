"""AMD-tuned launch options: every launch passes waves_per_eu, matrix_instr_nonkdim and kpack.

A small MLA decode kernel (one program per sequence, all 16 heads at once, fp32 matrix products so
Triton's CPU interpreter computes them right) whose launch always adds the three AMD-only options,
as a file tuned on an MI300 / MI355X would. The CPU interpreter ignores them, so the file passes
the task's checks on the CPU; what it costs is only visible when compiled.

What the cross-compile report (harness/compile/) must say about it:
  * gfx950 and gfx942: compiled, with MFMA instructions, at the 2 waves per SIMD waves_per_eu asks
    for (the compiler caps the registers at 256 for it; with these fp32 tiles that costs spills,
    which the report shows);
  * gfx950: kpack is ignored there (KPACK_ON_GFX950);
  * any NVIDIA target: failed, naming the AMD-only options (AMD_OPTIONS_ON_NVIDIA): Triton on
    NVIDIA rejects a launch with them.
tests/test_crosscompile.py checks these.
"""

import torch
import triton
import triton.language as tl

AMD_OPTIONS = dict(waves_per_eu=2, matrix_instr_nonkdim=16, kpack=2)
BLOCK_N = 16
LOG2E = 1.4426950408889634


@triton.jit
def _decode_kernel(q_ptr, kv_ptr, out_ptr, qo_indptr_ptr, kv_indptr_ptr, qk_scale,
                   stride_q_row, stride_kv_row,
                   HEADS: tl.constexpr, D_V: tl.constexpr, D_ROPE: tl.constexpr, BLOCK_N: tl.constexpr):
    seq = tl.program_id(0)
    q_start, q_end = tl.load(qo_indptr_ptr + seq), tl.load(qo_indptr_ptr + seq + 1)
    kv_start, kv_end = tl.load(kv_indptr_ptr + seq), tl.load(kv_indptr_ptr + seq + 1)
    heads = tl.arange(0, HEADS)
    dims_v = tl.arange(0, D_V)
    dims_rope = D_V + tl.arange(0, D_ROPE)
    offs_n = tl.arange(0, BLOCK_N)
    for row in range(q_start, q_end):
        q_base = q_ptr + row * stride_q_row + heads[:, None] * (D_V + D_ROPE)
        q_v = tl.load(q_base + dims_v[None, :]).to(tl.float32)
        q_rope = tl.load(q_base + dims_rope[None, :]).to(tl.float32)
        m_i = tl.full([HEADS], float("-inf"), tl.float32)
        l_i = tl.zeros([HEADS], tl.float32)
        acc = tl.zeros([HEADS, D_V], tl.float32)
        for n0 in range(kv_start, kv_end, BLOCK_N):
            kv_row = n0 + offs_n
            ok = kv_row < kv_end
            kv_base = kv_ptr + kv_row[:, None] * stride_kv_row
            k_v = tl.load(kv_base + dims_v[None, :], mask=ok[:, None], other=0.0).to(tl.float32)
            k_rope = tl.load(kv_base + dims_rope[None, :], mask=ok[:, None], other=0.0).to(tl.float32)
            s = (tl.dot(q_v, tl.trans(k_v)) + tl.dot(q_rope, tl.trans(k_rope))) * qk_scale
            s = tl.where(ok[None, :], s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            alpha = tl.exp2(m_i - m_new)
            p = tl.exp2(s - m_new[:, None])
            l_i = l_i * alpha + tl.sum(p, 1)
            acc = acc * alpha[:, None] + tl.dot(p, k_v)
            m_i = m_new
        out = acc / tl.where(l_i > 0.0, l_i, 1.0)[:, None]
        tl.store(out_ptr + (row * HEADS + heads[:, None]) * D_V + dims_v[None, :], out.to(tl.bfloat16))


def custom_kernel(data):
    q, kv_data, qo_indptr, kv_indptr, config = data
    kv = kv_data["bf16"]
    q = q.contiguous()
    out = torch.empty(q.shape[0], q.shape[1], 512, dtype=torch.bfloat16, device=q.device)
    _decode_kernel[(qo_indptr.shape[0] - 1,)](
        q, kv, out, qo_indptr, kv_indptr, config["sm_scale"] * LOG2E, q.stride(0), kv.stride(0),
        HEADS=q.shape[1], D_V=512, D_ROPE=64, BLOCK_N=BLOCK_N, num_warps=4, num_stages=1, **AMD_OPTIONS)
    return out
