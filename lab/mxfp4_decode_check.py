"""Bit-exact check of triton_mxfp4's decoding: every code, every exponent.

Decodes cache rows that hold all 256 byte values under all 255 e8m0 exponents (0..254) with the
submission's own `_load_fp4_raw` / `_decode_fp4`: on an NVIDIA GPU once with the PTX decoder (bf16
results, as the kernel uses them) and once with the portable Triton code (fp32 results, before the
kernel's cast to its operand type); on a CPU machine (TRITON_INTERPRET=1) the portable code only,
which is how the CPU tests use it. Each result, widened to fp32, must equal harness.task.quant's fp32
dequantization bit for bit (an e2m1 value times a power of two has at most two significant bits,
so bf16 holds it exactly; fp32 is compared because the interpreter rounds fp32 -> bf16 subnormals
wrongly). Exit status 1 on any mismatch.

Usage (repo root; on a CPU machine prefix TRITON_INTERPRET=1):
    python lab/mxfp4_decode_check.py [submissions/triton_mxfp4.py]
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from harness.api import dequantize_mxfp4  # noqa: E402
from harness.api import load_module  # noqa: E402

_path = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "submissions" / "triton_mxfp4.py")
sub = load_module(_path, "mxfp4_submission")
_load_fp4_raw, _decode_fp4 = sub._load_fp4_raw, sub._decode_fp4


@triton.jit
def _decode_part(packed_ptr, scale_ptr, out_ptr, rows, ok, n_rows, stride_packed_row, stride_scale_row,
                 FIRST: tl.constexpr, COUNT: tl.constexpr, PTX_DECODE: tl.constexpr):
    raw, exponent = _load_fp4_raw(packed_ptr, scale_ptr, rows, n_rows, FIRST, COUNT,
                                  stride_packed_row, stride_scale_row, 32)
    even, odd = _decode_fp4(raw, exponent, tl.float32 if not PTX_DECODE else tl.bfloat16, PTX_DECODE)
    col = 2 * (FIRST * 16 + tl.arange(0, COUNT * 16))
    ptrs = out_ptr + rows[:, None] * 576 + col[None, :]
    tl.store(ptrs, even.to(tl.float32), mask=ok[:, None])   # bf16 -> fp32 is exact
    tl.store(ptrs + 1, odd.to(tl.float32), mask=ok[:, None])


@triton.jit
def _decode_rows(packed_ptr, scale_ptr, out_ptr, n_rows, stride_packed_row, stride_scale_row,
                 BLOCK_N: tl.constexpr, PTX_DECODE: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    ok = rows < n_rows
    _decode_part(packed_ptr, scale_ptr, out_ptr, rows, ok, n_rows, stride_packed_row, stride_scale_row,
                 0, 16, PTX_DECODE)       # the 16 latent blocks
    _decode_part(packed_ptr, scale_ptr, out_ptr, rows, ok, n_rows, stride_packed_row, stride_scale_row,
                 16, 2, PTX_DECODE)       # the 2 rope blocks


def main() -> int:
    exps = torch.arange(255, dtype=torch.uint8)
    byte_values = torch.arange(256, dtype=torch.uint8)
    rows = exps.numel() * 2                      # every exponent, two rows each
    packed = byte_values.repeat(rows, 2)[:, :288].clone()
    packed[1::2] = packed[1::2].roll(128, dims=1)   # the second row of each pair: bytes shifted
    scales = torch.full((rows, 24), 127, dtype=torch.uint8)
    scales[:, :18] = exps.repeat_interleave(2)[:, None]
    scales[1::2, :18] = (exps.repeat_interleave(2)[1::2, None] + torch.arange(18)) % 255
    expected = dequantize_mxfp4(packed, scales)  # fp32; every value is exact in bf16 too

    gpu = torch.cuda.is_available()             # on CPU (TRITON_INTERPRET=1): the portable path only
    device = "cuda" if gpu else "cpu"
    packed, scales = packed.to(device), scales.to(device)
    failed = 0
    for ptx in (True, False) if gpu else (False,):
        out = torch.empty(rows, 576, dtype=torch.float32, device=device)
        _decode_rows[(triton.cdiv(rows, 32),)](packed, scales, out, rows, packed.stride(0), scales.stride(0),
                                               BLOCK_N=32, PTX_DECODE=ptx)
        got = out.cpu()
        same = (got.view(torch.int32) == expected.view(torch.int32)) | (got.isnan() & expected.isnan())
        bad = (~same).sum().item()
        failed += bad
        print(f"{'PTX' if ptx else 'portable'} decoder: {same.numel() - bad} of {same.numel()} values bit-exact"
              + ("" if not bad else f"; first mismatch at {tuple((~same).nonzero()[0].tolist())}: "
                 f"got {got[~same][0].item()}, expected {expected[~same][0].item()}"))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
