"""The MLA decode task as code: inputs, the fp32 reference, and the check.

Pure PyTorch (no vendor library): runs on CUDA, ROCm and CPU. Drop-in compatible with the AMD
Developer Challenge's `amd-mixed-mla` reference: `generate_input(batchsize, qseqlen, kvseqlen,
seed)` returns `(q, kv_data, qo_indptr, kv_indptr, config)` and `ref_kernel(data)` the expected
output. The harness additionally uses `reference_outputs` and `check_output`, which judge an
output against every legitimate precision path a submission may take (task.yml `check:`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Optional, Sequence

import torch

from harness.device import detect, fp8_dtype
from harness.quant import dequantize_fp8, dequantize_mxfp4, quantize_fp8, quantize_mxfp4

NUM_HEADS = 16
NUM_KV_HEADS = 1
KV_LORA_RANK = 512
QK_ROPE_HEAD_DIM = 64
QK_HEAD_DIM = KV_LORA_RANK + QK_ROPE_HEAD_DIM  # 576
V_HEAD_DIM = KV_LORA_RANK                      # 512
SM_SCALE = 1.0 / math.sqrt(QK_HEAD_DIM)

# Shape of the data: a few latent channels carry outliers (as real MLA caches do), and the
# query heads differ in sharpness, so attention is peaked for some heads and broad for others.
OUTLIER_CHANNELS = 8
OUTLIER_GAIN = 6.0
HEAD_TEMPERATURES = (0.6, 1.8)  # q scale of the first and last head, geometric in between

input_t = tuple  # (q, kv_data, qo_indptr, kv_indptr, config)
output_t = torch.Tensor


def generate_input(batchsize: int, qseqlen: int, kvseqlen: int, seed: int,
                   kvseqlens: Optional[Sequence[int]] = None, device: Optional[str] = None) -> input_t:
    """Inputs for one case. Lengths come from the case (`kvseqlens` for a ragged batch, else
    `kvseqlen` for every sequence); values come from `seed`. Same seed, same device: same data."""
    dev = torch.device(device) if device else detect().torch_device
    lengths = list(kvseqlens) if kvseqlens is not None else [kvseqlen] * batchsize
    if len(lengths) != batchsize or min(lengths) < 0:
        raise ValueError(f"kvseqlens must list {batchsize} non-negative lengths, got {lengths}")
    total_q, total_kv = batchsize * qseqlen, sum(lengths)
    gen = torch.Generator(device=dev).manual_seed(seed)

    head_scale = torch.logspace(math.log10(HEAD_TEMPERATURES[0]), math.log10(HEAD_TEMPERATURES[1]),
                                NUM_HEADS, device=dev).view(1, NUM_HEADS, 1)
    q = torch.randn((total_q, NUM_HEADS, QK_HEAD_DIM), generator=gen, device=dev) * head_scale
    kv = torch.randn((total_kv, NUM_KV_HEADS, QK_HEAD_DIM), generator=gen, device=dev)
    outliers = torch.randperm(QK_HEAD_DIM, generator=gen, device=dev)[:OUTLIER_CHANNELS]
    kv[..., outliers] *= OUTLIER_GAIN
    q, kv = q.to(torch.bfloat16), kv.to(torch.bfloat16)

    fp8 = quantize_fp8(kv, fp8_dtype(detect(dev.type)))
    mx_packed, mx_scales = quantize_mxfp4(kv)
    kv_data = {"bf16": kv, "fp8": fp8, "mxfp4": (mx_packed.view(total_kv, NUM_KV_HEADS, QK_HEAD_DIM // 2), mx_scales)}

    qo_indptr = torch.arange(batchsize + 1, dtype=torch.int32, device=dev) * qseqlen
    kv_indptr = torch.zeros(batchsize + 1, dtype=torch.int32, device=dev)
    kv_indptr[1:] = torch.tensor(lengths, dtype=torch.int32, device=dev).cumsum(0)
    config = {
        "batch_size": batchsize, "num_heads": NUM_HEADS, "num_kv_heads": NUM_KV_HEADS,
        "qk_head_dim": QK_HEAD_DIM, "kv_lora_rank": KV_LORA_RANK, "qk_rope_head_dim": QK_ROPE_HEAD_DIM,
        "v_head_dim": V_HEAD_DIM, "q_seq_len": qseqlen, "kv_seq_len": max(lengths) if lengths else 0,
        "sm_scale": SM_SCALE,
    }
    return q, kv_data, qo_indptr, kv_indptr, config


# ---------------------------------------------------------------- the fp32 reference
def attention_fp32(q: torch.Tensor, kv: torch.Tensor, qo_indptr: torch.Tensor, kv_indptr: torch.Tensor,
                   sm_scale: float = SM_SCALE) -> torch.Tensor:
    """softmax(q·kᵀ·sm_scale)·v in fp32. q (total_q, H, 576); kv (total_kv, 1, 576), any float dtype.
    Returns (total_q, H, 512) float32."""
    qf, kf = q.float(), kv.float().reshape(kv.shape[0], -1)
    qo, kvp = qo_indptr.tolist(), kv_indptr.tolist()
    q_lens = {b - a for a, b in zip(qo, qo[1:])}
    kv_lens = {b - a for a, b in zip(kvp, kvp[1:])}
    batch = len(qo) - 1
    if len(q_lens) == 1 and len(kv_lens) == 1 and kv_lens != {0}:  # uniform batch: one bmm
        qb = qf.reshape(batch, -1, qf.shape[-1])          # (B, qlen*H, 576)
        kb = kf.reshape(batch, -1, kf.shape[-1])          # (B, L, 576)
        probs = torch.softmax(torch.bmm(qb, kb.transpose(1, 2)) * sm_scale, dim=-1)
        return torch.bmm(probs, kb[..., :V_HEAD_DIM]).reshape(q.shape[0], q.shape[1], V_HEAD_DIM)
    out = torch.zeros(q.shape[0], q.shape[1], V_HEAD_DIM, dtype=torch.float32, device=q.device)
    for b in range(batch):
        qs, ks = qf[qo[b]:qo[b + 1]], kf[kvp[b]:kvp[b + 1]]
        if ks.shape[0] == 0:
            continue  # attention over nothing: zeros by convention
        probs = torch.softmax(torch.einsum("qhd,kd->qhk", qs, ks) * sm_scale, dim=-1)
        out[qo[b]:qo[b + 1]] = torch.einsum("qhk,kd->qhd", probs, ks[:, :V_HEAD_DIM])
    return out


def dequantized_kv(kv_data: dict, fmt: str) -> torch.Tensor:
    """The KV cache as a submission reading format `fmt` sees it, in float32 (total_kv, 1, 576)."""
    if fmt == "bf16":
        return kv_data["bf16"].float()
    if fmt == "fp8":
        return dequantize_fp8(*kv_data["fp8"])
    if fmt == "mxfp4":
        return dequantize_mxfp4(*kv_data["mxfp4"])
    raise ValueError(f"unknown KV format {fmt!r}")


def ref_kernel(data: input_t) -> output_t:
    """The exact answer, as the competition's ref_kernel returns it: fp32 math on the bf16 KV."""
    q, kv_data, qo_indptr, kv_indptr, config = data
    return attention_fp32(q, kv_data["bf16"], qo_indptr, kv_indptr, config["sm_scale"]).to(torch.bfloat16)


# ---------------------------------------------------------------- judging an output
Q_PRECISIONS = ("bf16", "fp8")  # a submission may quantize q down to fp8 (per tensor)


def reference_outputs(data: input_t) -> dict[str, torch.Tensor]:
    """fp32 references for every legitimate precision path: KV format × q precision.
    Keys look like "kv=mxfp4,q=fp8". Computed in the trusted parent only."""
    q, kv_data, qo_indptr, kv_indptr, config = data
    fp8 = kv_data["fp8"][0].dtype
    queries = {"bf16": q, "fp8": dequantize_fp8(*quantize_fp8(q, fp8))}
    out = {}
    for fmt in kv_data:
        kv = dequantized_kv(kv_data, fmt)
        for qp in Q_PRECISIONS:
            out[f"kv={fmt},q={qp}"] = attention_fp32(queries[qp], kv, qo_indptr, kv_indptr, config["sm_scale"])
    return out


def check_output(output: torch.Tensor, expected: dict[str, torch.Tensor], tolerance: dict[str, float]
                 ) -> tuple[bool, str]:
    """Pass when the output matches some legitimate path's reference within the task's bounds:
    relative L2 over the whole output (`rel_l2`) and over every (row, head) (`row_rel_l2`)."""
    out = output.float()
    best = None
    for path, ref in expected.items():
        err = (out - ref).norm() / ref.norm().clamp(min=1e-30)
        row_err = ((out - ref).norm(dim=-1) / ref.norm(dim=-1).clamp(min=1e-6)).amax() if ref.numel() else err
        err, row_err = float(err), float(row_err)
        if err <= tolerance["rel_l2"] and row_err <= tolerance["row_rel_l2"]:
            return True, f"matches {path}: rel L2 {err:.2%}, worst row {row_err:.2%}"
        if best is None or err < best[1]:
            best = (path, err, row_err)
    path, err, row_err = best
    return False, (f"output differs from the reference: closest path {path} has rel L2 error {err:.2%} "
                   f"(limit {tolerance['rel_l2']:.0%}), worst (row, head) {row_err:.2%} "
                   f"(limit {tolerance['row_rel_l2']:.0%})")


def output_layout(data: input_t) -> tuple[tuple[int, ...], torch.dtype]:
    q = data[0]
    return (q.shape[0], q.shape[1], V_HEAD_DIM), torch.bfloat16


def case_label(args: dict) -> str:
    """Short column title for a case, e.g. "256×8k" or "6×≤4k ragged"."""
    def k(n: int) -> str:
        return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n)
    q = f" q{args['qseqlen']}" if args.get("qseqlen", 1) != 1 else ""
    if args.get("kvseqlens"):
        return f"{args['batchsize']}×≤{k(max(args['kvseqlens']))}{q} ragged"
    return f"{args['batchsize']}×{k(args['kvseqlen'])}{q}"


def check_implementation(data: input_t, output: output_t) -> tuple[bool, str]:
    """The competition's entry point: compare an output with the references for `data`, using
    the tolerances of the task.yml next to this file."""
    from harness.spec import load_task

    tolerance = load_task(Path(__file__).with_name("task.yml")).check
    return check_output(output, reference_outputs(data), tolerance)
