"""Low-precision formats the KV cache comes in: per-tensor fp8 and OCP MX fp4 (mxfp4).

mxfp4 (OCP Microscaling spec v1.0): blocks of 32 consecutive elements share one e8m0 scale
(a bare exponent, value 2**(e - 127)); each element is e2m1 (sign, 2 exponent bits, 1 mantissa
bit: magnitudes 0, .5, 1, 1.5, 2, 3, 4, 6), two per byte with the even element in the low nibble.
The shared exponent follows ROCm/aiter's `dynamic_mxfp4_quant`: round the block's amax up at the
mantissa's second bit, take floor(log2) and subtract 2 (the e2m1 max exponent), so the largest
element lands in [4, 8) and saturates at 6.

Scale layout: the competition's aiter build returned the scales row-major with the 18 blocks of a
576-wide row padded to 24 columns; we hand out a (rows, 24) tensor whose first 18 columns are
live, so code that slices `[..., :18]` or indexes with the row stride both work.
"""

from __future__ import annotations

import torch

E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
MX_BLOCK = 32
SCALE_COLUMNS_PADDED = 24  # 576 / 32 = 18 live blocks, stored with a row stride of 24
E8M0_BIAS = 127


def e8m0_dtype() -> torch.dtype:
    return getattr(torch, "float8_e8m0fnu", torch.uint8)


CHUNK_ROWS = 1 << 15  # rows converted at a time: the float32 temporaries of a whole 256×8k cache need
                     # tens of GiB, enough to run an 80 GB GPU out of memory beside a worker


def _rows(x: torch.Tensor) -> torch.Tensor:
    return x.reshape(-1, x.shape[-1])


# ---------------------------------------------------------------- fp8, one scale per tensor
def quantize_fp8(x: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """x ≈ q.float() * scale with scale = amax / fp8_max (a float32 tensor of shape (1,))."""
    fp8_max = torch.finfo(dtype).max
    amax = x.abs().amax().float().clamp(min=1e-12)
    scale = (amax / fp8_max).reshape(1)
    flat = _rows(x)
    q = torch.empty(flat.shape, dtype=dtype, device=x.device)
    for i in range(0, flat.shape[0], CHUNK_ROWS):
        q[i:i + CHUNK_ROWS] = (flat[i:i + CHUNK_ROWS].float() / scale).clamp(-fp8_max, fp8_max).to(dtype)
    return q.reshape(x.shape), scale


def dequantize_fp8(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return q.float().mul_(scale.float())


# ---------------------------------------------------------------- mxfp4, one scale per 32
def quantize_mxfp4(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize along the last dim (a multiple of 32), CHUNK_ROWS rows at a time.

    Returns (packed uint8 [..., D/2], scales e8m0 [rows, 24]) with rows = x.numel() // D.
    """
    d = x.shape[-1]
    if d % MX_BLOCK:
        raise ValueError(f"mxfp4 needs the last dim to be a multiple of {MX_BLOCK}, got {d}")
    flat = _rows(x)
    packed = torch.empty(flat.shape[0], d // 2, dtype=torch.uint8, device=x.device)
    scales = torch.full((flat.shape[0], SCALE_COLUMNS_PADDED), E8M0_BIAS, dtype=torch.uint8, device=x.device)
    for i in range(0, flat.shape[0], CHUNK_ROWS):
        packed[i:i + CHUNK_ROWS], scales[i:i + CHUNK_ROWS, : d // MX_BLOCK] = _mxfp4_rows(flat[i:i + CHUNK_ROWS])
    return packed.reshape(*x.shape[:-1], d // 2), scales.view(e8m0_dtype())


def _mxfp4_rows(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(packed codes, biased exponents) of a (rows, D) block."""
    d = rows.shape[-1]
    blocks = rows.float().reshape(-1, d // MX_BLOCK, MX_BLOCK)
    amax = blocks.abs().amax(dim=-1)
    # Round amax up at its 2nd mantissa bit (aiter's "even" rounding), keep the exponent.
    bits = amax.view(torch.int32) + 0x200000
    exp = ((bits >> 23) & 0xFF) - 127 - 2  # floor(log2(rounded amax)) - emax(e2m1)
    exp = torch.where(amax == 0, torch.full_like(exp, -127), exp).clamp(-127, 127)
    scaled = blocks / torch.exp2(exp.float()).unsqueeze(-1)
    codes = _e2m1_encode(scaled).reshape(-1, d)
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).to(torch.uint8), (exp + E8M0_BIAS).to(torch.uint8)


def dequantize_mxfp4(packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """Inverse of quantize_mxfp4: float32 [..., 2 * packed.shape[-1]], CHUNK_ROWS rows at a time."""
    d = packed.shape[-1] * 2
    nblocks = d // MX_BLOCK
    flat = _rows(packed)
    exps = scales.view(torch.uint8)[: flat.shape[0], :nblocks]
    out = torch.empty(flat.shape[0], d, dtype=torch.float32, device=packed.device)
    for i in range(0, flat.shape[0], CHUNK_ROWS):
        part = flat[i:i + CHUNK_ROWS]
        codes = torch.stack((part & 0xF, part >> 4), dim=-1).reshape(part.shape[0], d)
        values = _e2m1_decode(codes).reshape(-1, nblocks, MX_BLOCK)
        exp = exps[i:i + CHUNK_ROWS].to(torch.int32) - E8M0_BIAS
        out[i:i + CHUNK_ROWS] = (values * torch.exp2(exp.float()).unsqueeze(-1)).reshape(-1, d)
    return out.reshape(*packed.shape[:-1], d)


def _e2m1_encode(v: torch.Tensor) -> torch.Tensor:
    """Round to the nearest e2m1 value, ties to the even code (as IEEE rounding does).

    The grid has step 0.5 below 2, 1 up to 4 and 2 up to 6; 2 and 4 lie on both neighbouring
    grids, so rounding on the grid of the value's own range is exact, and torch.round rounds
    half to even, which is the even code here."""
    mag = v.abs().clamp(max=6.0)
    step = torch.where(mag < 2, 0.5, torch.where(mag < 4, 1.0, 2.0))
    val = torch.round(mag / step) * step
    code = torch.where(val < 2, val * 2, torch.where(val < 4, val + 2, val / 2 + 4)).to(torch.int32)
    sign = ((v < 0) & (code > 0)).to(torch.int32) << 3
    return code | sign


def _e2m1_decode(codes: torch.Tensor) -> torch.Tensor:
    table = torch.tensor(E2M1_VALUES, device=codes.device)
    mag = table[(codes & 7).long()]
    return torch.where((codes & 8) != 0, -mag, mag)
