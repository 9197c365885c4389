"""Which matrix instructions Triton picks for MLA's q.K^T on Hopper (sm_90), compiled offline on a
machine without a GPU (Triton ships ptxas): the product as the bundled files write it (M = 16 heads,
S = q.K^T) and swapped (M = 64 KV rows, S^T = K.q^T), with fp8 e4m3 and bf16 operands.

Usage (any machine with Triton's NVIDIA backend, no GPU needed):
    python lab/sm90_mma_shapes.py
Prints one line per variant: the PTX matrix instructions and the shared memory the kernel takes.
"""

from __future__ import annotations

import re

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget


@triton.jit
def _swapped(k_ptr, q_ptr, s_ptr, BLOCK_N: tl.constexpr, D: tl.constexpr, H: tl.constexpr):
    n, d, h = tl.arange(0, BLOCK_N), tl.arange(0, D), tl.arange(0, H)
    k = tl.load(k_ptr + n[:, None] * D + d[None, :])          # [BLOCK_N, D]
    qt = tl.load(q_ptr + h[None, :] * D + d[:, None])         # [D, H]
    tl.store(s_ptr + n[:, None] * H + h[None, :], tl.dot(k, qt))


@triton.jit
def _as_written(k_ptr, q_ptr, s_ptr, BLOCK_N: tl.constexpr, D: tl.constexpr, H: tl.constexpr):
    n, d, h = tl.arange(0, BLOCK_N), tl.arange(0, D), tl.arange(0, H)
    q = tl.load(q_ptr + h[:, None] * D + d[None, :])          # [H, D]
    kt = tl.load(k_ptr + n[None, :] * D + d[:, None])         # [D, BLOCK_N]
    tl.store(s_ptr + h[:, None] * BLOCK_N + n[None, :], tl.dot(q, kt))


def main() -> None:
    print(f"Triton {triton.__version__}, target sm_90, 4 warps, BLOCK_N = 64 KV rows, D = 512, H = 16 heads")
    for name, fn in (("S = q.K^T (M = 16 heads)", _as_written), ("S^T = K.q^T (M = 64 KV rows)", _swapped)):
        for dtype in ("fp8e4nv", "bf16"):
            source = triton.compiler.ASTSource(
                fn=fn, signature={"k_ptr": f"*{dtype}", "q_ptr": f"*{dtype}", "s_ptr": "*fp32", "BLOCK_N": "constexpr",
                                  "D": "constexpr", "H": "constexpr"},
                constexprs={"BLOCK_N": 64, "D": 512, "H": 16})
            kernel = triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
            found = sorted(set(re.findall(r"\b(?:wgmma\.mma_async|mma)\.sync\S*|\bwgmma\.mma_async\S*", kernel.asm["ptx"])))
            print(f"{name}, {dtype} operands: {', '.join(found) or 'no matrix instruction'}; "
                  f"shared memory {kernel.metadata.shared} B")


if __name__ == "__main__":
    main()
