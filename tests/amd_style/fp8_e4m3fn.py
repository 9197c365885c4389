"""OCP fp8 loads: the KV cache is read as float8_e4m3fn, the type the CPU and NVIDIA inputs have.

A small MLA decode kernel (one program per sequence, all 16 heads at once) over kv_data["fp8"]:
each tile is loaded as fp8, widened to fp32 and multiplied by the per-tensor scale, so Triton's
CPU interpreter computes it right and the file passes the task's checks on the CPU.

What the cross-compile report (harness/compile/) must say about it:
  * gfx950: compiled, no fp8 message (MI355X's fp8 is OCP e4m3fn);
  * gfx942: compiled, with the named message FP8_OCP_ON_GFX942: MI300's fp8 is e4m3fnuz, which is
    what the harness hands a submission there, and OCP e4m3 is converted in software.
tests/test_crosscompile.py checks these.
"""

import torch
import triton
import triton.language as tl

BLOCK_N = 16
LOG2E = 1.4426950408889634


@triton.jit
def _fp8_decode_kernel(q_ptr, kv_ptr, scale_ptr, out_ptr, qo_indptr_ptr, kv_indptr_ptr, qk_scale,
                       stride_q_row, stride_kv_row,
                       HEADS: tl.constexpr, D_V: tl.constexpr, D_ROPE: tl.constexpr, BLOCK_N: tl.constexpr):
    seq = tl.program_id(0)
    q_start, q_end = tl.load(qo_indptr_ptr + seq), tl.load(qo_indptr_ptr + seq + 1)
    kv_start, kv_end = tl.load(kv_indptr_ptr + seq), tl.load(kv_indptr_ptr + seq + 1)
    kv_scale = tl.load(scale_ptr)
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
            k_v = tl.load(kv_base + dims_v[None, :], mask=ok[:, None], other=0.0).to(tl.float32) * kv_scale
            k_rope = tl.load(kv_base + dims_rope[None, :], mask=ok[:, None], other=0.0).to(tl.float32) * kv_scale
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
    kv, scale = kv_data["fp8"]
    q = q.contiguous()
    out = torch.empty(q.shape[0], q.shape[1], 512, dtype=torch.bfloat16, device=q.device)
    _fp8_decode_kernel[(qo_indptr.shape[0] - 1,)](
        q, kv, scale, out, qo_indptr, kv_indptr, config["sm_scale"] * LOG2E, q.stride(0), kv.stride(0),
        HEADS=q.shape[1], D_V=512, D_ROPE=64, BLOCK_N=BLOCK_N, num_warps=4)
    return out
