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
from typing import Iterator, Optional, Sequence

import torch

from harness.device import detect, fp8_dtype
from harness.task.quant import dequantize_fp8, dequantize_mxfp4, quantize_fp8, quantize_mxfp4
from harness.task.verdict import index_ranges

NUM_HEADS = 16
NUM_KV_HEADS = 1
KV_LORA_RANK = 512
QK_ROPE_HEAD_DIM = 64
QK_HEAD_DIM = KV_LORA_RANK + QK_ROPE_HEAD_DIM  # 576
V_HEAD_DIM = KV_LORA_RANK                      # 512
SM_SCALE = 1.0 / math.sqrt(QK_HEAD_DIM)
TIE = 1e-9                 # check_ratio: ratios this close (relative) are ties (errors are float64)

# Shape of the data: a few latent channels carry outliers (as real MLA caches do), and the
# query heads differ in sharpness, so attention is peaked for some heads and broad for others.
OUTLIER_CHANNELS = 8
OUTLIER_GAIN = 6.0
# The broadest heads have a score std of ~1 (like the competition's plain randn inputs) and scores
# are independent across heads, so hardly any token is negligible in all 16 heads of its row: a
# kernel that skips P·V for the tokens whose weight is small in every head (the skipping that saves
# work when the heads share a tile) drops weight the broad heads show. Measured over 32 CPU cases up
# to 4×8k (BENCHMARKS.md, session 13): at thresholds up to 10% of the largest weight, every such
# kernel that passed the check skipped at most 3.4% of the tokens.
HEAD_TEMPERATURES = (0.3, 1.8)  # q scale of the first and last head, geometric in between
ROPE_GAIN = 3.0  # RoPE dims of q and k scaled up: which tokens matter is decided outside V
# style="competition": the competition's final inputs (its reference.py of 2026-03-18: plain unit
# randn for q and the cache, no outlier channels, heads alike, RoPE dims as the rest).
INPUT_STYLES = ("default", "competition")

input_t = tuple  # (q, kv_data, qo_indptr, kv_indptr, config)
output_t = torch.Tensor


MAX_QUERY_ROWS = 1 << 16       # batchsize x qseqlen: 64x the largest benchmark's 1,024
MAX_CACHE_ROWS = 1 << 22       # total KV rows: 2x the largest benchmark's 2,097,152 (~10 GB while generated)


def check_case(batchsize: int, qseqlen: int, kvseqlen: int, seed: int, kvseqlens: Optional[Sequence[int]] = None,
               device: Optional[str] = None, style: str = "default") -> None:
    """Raise ValueError (one line) unless generate_input can make this case: whole-number sizes of at
    least 1 (a ragged batch's lengths at least 0, not all 0), at most MAX_QUERY_ROWS query rows and
    MAX_CACHE_ROWS cache rows, a seed the generators take (0 to 2**63 - 1), a known style. The harness
    calls it for every case of task.yml, --shape and a popcorn TESTFILE before any work starts."""
    def whole(name, value, least):
        if type(value) is not int or value < least:
            raise ValueError(f"{name} must be a whole number of at least {least}, got {value!r}")

    whole("batchsize", batchsize, 1)
    whole("qseqlen", qseqlen, 1)
    whole("kvseqlen", kvseqlen, 1)  # (with kvseqlens: the longest, shown in the case's name)
    if batchsize * qseqlen > MAX_QUERY_ROWS:  # (before any list of batchsize lengths is made)
        raise ValueError(f"batchsize x qseqlen is {batchsize * qseqlen:,} query rows, over the {MAX_QUERY_ROWS:,} allowed")
    if kvseqlens is None:
        lengths = [kvseqlen] * batchsize
    else:
        lengths = list(kvseqlens)
        for length in lengths:
            whole("each of kvseqlens", length, 0)
        if len(lengths) != batchsize or sum(lengths) == 0:
            raise ValueError(f"kvseqlens must list {batchsize} lengths (batchsize), not all 0, got {len(lengths)} "
                             f"adding up to {sum(lengths)}")
    if type(seed) is not int or not 0 <= seed < 2**63:
        raise ValueError(f"seed must be a whole number from 0 to 2**63 - 1, got {seed!r}")
    if sum(lengths) > MAX_CACHE_ROWS:
        raise ValueError(f"the cache has {sum(lengths):,} rows, over the {MAX_CACHE_ROWS:,} allowed")
    if style not in INPUT_STYLES:
        raise ValueError(f"style must be one of {', '.join(INPUT_STYLES)}, got {style!r}")


def generate_input(batchsize: int, qseqlen: int, kvseqlen: int, seed: int,
                   kvseqlens: Optional[Sequence[int]] = None, device: Optional[str] = None,
                   style: str = "default") -> input_t:
    """Inputs for one case. Lengths come from the case (`kvseqlens` for a ragged batch, else
    `kvseqlen` for every sequence); values come from `seed`. Same seed, same device: same data.
    `style`: "default" (outlier channels, heads of different sharpness, scaled RoPE dims: a wrong
    kernel shows) or "competition" (the competition's final inputs: plain randn for q and the cache)."""
    if style not in INPUT_STYLES:
        raise ValueError(f"style must be one of {', '.join(INPUT_STYLES)}, got {style!r}")
    dev = torch.device(device) if device else detect().torch_device
    lengths = list(kvseqlens) if kvseqlens is not None else [kvseqlen] * batchsize
    if len(lengths) != batchsize or min(lengths) < 0:
        raise ValueError(f"kvseqlens must list {batchsize} non-negative lengths, got {lengths}")
    total_q, total_kv = batchsize * qseqlen, sum(lengths)
    gen = torch.Generator(device=dev).manual_seed(seed)

    if style == "competition":
        q = torch.randn((total_q, NUM_HEADS, QK_HEAD_DIM), generator=gen, device=dev)
        kv = torch.randn((total_kv, NUM_KV_HEADS, QK_HEAD_DIM), generator=gen, device=dev)
    else:
        head_scale = torch.logspace(math.log10(HEAD_TEMPERATURES[0]), math.log10(HEAD_TEMPERATURES[1]),
                                    NUM_HEADS, device=dev).view(1, NUM_HEADS, 1)
        q = torch.randn((total_q, NUM_HEADS, QK_HEAD_DIM), generator=gen, device=dev) * head_scale
        kv = torch.randn((total_kv, NUM_KV_HEADS, QK_HEAD_DIM), generator=gen, device=dev)
        outliers = torch.randperm(KV_LORA_RANK, generator=gen, device=dev)[:OUTLIER_CHANNELS]
        kv[..., outliers] *= OUTLIER_GAIN
        q[..., KV_LORA_RANK:] *= ROPE_GAIN
        kv[..., KV_LORA_RANK:] *= ROPE_GAIN
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

    def attend(qs: torch.Tensor, ks: torch.Tensor) -> torch.Tensor:
        probs = torch.softmax(torch.einsum("qhd,kd->qhk", qs, ks) * sm_scale, dim=-1)
        return torch.einsum("qhk,kd->qhd", probs, ks[:, :V_HEAD_DIM])

    return per_sequence(qf, kf, qo_indptr, kv_indptr, attend)


def per_sequence(q: torch.Tensor, keys: torch.Tensor, qo_indptr: torch.Tensor, kv_indptr: torch.Tensor,
                 attend, keep: Optional[torch.Tensor] = None) -> torch.Tensor:
    """(total_q, H, 512) float32: each sequence's query rows get attend(its q rows, its key rows),
    only the rows where `keep` is true if given; a sequence with no key rows gets zeros."""
    out = torch.zeros(q.shape[0], q.shape[1], V_HEAD_DIM, dtype=torch.float32, device=q.device)
    qo, kvp = qo_indptr.tolist(), kv_indptr.tolist()
    for b in range(len(qo) - 1):
        ks = keys[kvp[b]:kvp[b + 1]]
        if keep is not None:
            ks = ks[keep[kvp[b]:kvp[b + 1]]]
        if ks.shape[0]:
            out[qo[b]:qo[b + 1]] = attend(q[qo[b]:qo[b + 1]], ks)
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
# The precision contract (task.yml `precision_contract`): read one KV format exactly as given;
# q as given (bf16) or quantized to fp8 e4m3 per tensor with scale = amax/fp8_max, its codes used
# as they are and the scale applied in fp32; fp32 scores, softmax and accumulation, P may be
# rounded to bf16 for the P·V product; output bf16.
Q_PRECISIONS = ("bf16", "fp8")


def quantized_q(q: torch.Tensor, precision: str, fp8: torch.dtype) -> torch.Tensor:
    return q.float() if precision == "bf16" else dequantize_fp8(*quantize_fp8(q, fp8))


class References(dict):
    """{path: fp32 reference}, as reference_outputs returns it, plus the inputs they were computed
    from (`data`): a failed check uses them to say where the output is off and which simple
    mistake explains it. A plain dict of references works too; its failures just say less."""

    def __init__(self, paths: dict[str, torch.Tensor], data: Optional[input_t] = None):
        super().__init__(paths)
        self.data = data


def reference_outputs(data: input_t) -> References:
    """fp32 references for every legitimate precision path: KV format × q precision.
    Keys look like "kv=mxfp4,q=fp8". Computed in the trusted parent only."""
    q, kv_data, qo_indptr, kv_indptr, config = data
    fp8 = kv_data["fp8"][0].dtype
    heads = q.shape[1]
    # Both q precisions side by side as extra heads: each KV format is read once for both.
    queries = torch.cat([quantized_q(q, qp, fp8) for qp in Q_PRECISIONS], dim=1)
    out = {}
    for fmt in kv_data:
        both = attention_fp32(queries, dequantized_kv(kv_data, fmt), qo_indptr, kv_indptr, config["sm_scale"])
        for i, qp in enumerate(Q_PRECISIONS):
            out[f"kv={fmt},q={qp}"] = both[:, i * heads:(i + 1) * heads]
    return References(out, data)


def errors(output: torch.Tensor, expected: torch.Tensor) -> tuple[float, float]:
    """(relative L2 error over the whole output, worst relative L2 error of one (row, head)).
    In float64: fp32 sums of a few million squares round differently with the memory layout and the
    thread count, by up to ~1e-4 relative, and the check names the closest path by these numbers."""
    expected = expected.double()
    diff = output.double() - expected
    whole = float(diff.norm() / expected.norm().clamp(min=1e-30))
    rows = float((diff.norm(dim=-1) / expected.norm(dim=-1).clamp(min=1e-6)).amax()) if diff.numel() else whole
    return whole, rows


def check_ratio(output: torch.Tensor, expected: dict[str, torch.Tensor], policy: str,
                params: dict[str, float]) -> tuple[float, str]:
    """How far the output is from passing: the smallest, over legitimate paths, of the largest
    error / limit. Below 1 passes. Returns (ratio, the closest path's description). Paths whose
    ratios differ only in rounding (within TIE, relative) are ties, and the first of them is named:
    an all-zero output is 100% off every path, and which one rounding favours depends on the
    inputs and the thread count, so the name would differ between processes."""
    found = []
    for path, ref in expected.items():
        if policy == "strict":
            whole, rows = errors(output, ref)
            ratio = max(whole / params["rel_l2"], rows / params["row_rel_l2"])
            text = (f"{path}: rel L2 {whole:.2%} (limit {_percent(params['rel_l2'])}), "
                    f"worst (row, head) {rows:.2%} (limit {_percent(params['row_rel_l2'])})")
        elif policy == "competition":  # the seed competition's check, for comparison
            if path != "kv=fp8,q=fp8":
                continue
            bad = ~torch.isclose(output.float(), ref, rtol=params["rtol"], atol=params["atol"])
            count = int(bad.sum())
            frac = count / max(bad.numel(), 1)
            ratio = frac / params["max_mismatch"] if params["max_mismatch"] > 0 else (0.0 if frac == 0 else 2.0)
            text = (f"{path}: {count} of {bad.numel()} elements ({frac:.2%}) outside rtol={params['rtol']}, "
                    f"atol={params['atol']} (limit {params['max_mismatch']:.0%})")
        else:
            raise ValueError(f"unknown check policy {policy!r}")
        if ratio < float("inf"):  # (NaN and infinite ratios name no path)
            found.append((ratio, text))
    if not found:
        return float("inf"), ""
    ratio = min(r for r, _ in found)
    return ratio, next(text for r, text in found if r <= ratio * (1 + TIE))


def _percent(fraction: float) -> str:
    return f"{fraction * 100:g}%"


def check_output(output: torch.Tensor, expected: dict[str, torch.Tensor], policy: str,
                 params: dict[str, float]) -> tuple[bool, str]:
    """Pass when the output matches some legitimate path's reference within the policy's bounds.
    A failure says which simple mistake explains it (if one does) and where the output is off."""
    ratio, text = check_ratio(output, expected, policy, params)
    if ratio <= 1.0:
        return True, f"matches {text}"
    start, end = "output differs from the reference; ", f"closest is {text}"
    explained = diagnosis(output, expected, policy, params)
    room = MAX_REASON - len(start) - len(end)
    if len(explained) > room:
        explained = explained[:max(0, room - 3)] + "…; "
    return False, start + explained + end


# ---------------------------------------------------------------- explaining a failed check
# Only when the check fails (never on the passing path, which runs after every timed call), and on
# at most DIAGNOSIS_SEQUENCES of the sequences that are off: each candidate mistake costs one
# attention over those sequences' KV rows per KV format, whatever the batch size (the rest, a
# few passes over the output and the references, is cheaper than computing the references).
DIAGNOSIS_SEQUENCES = 8
MAX_REASON = 300     # characters: a failure reason stays one line
MATCH_REL_L2 = 0.05  # a mistake is named when the output is within this rel L2 of it...
MATCH_MARGIN = 4.0   # ...and this many times closer to it than to every legitimate reference
TAIL_BLOCKS = (16, 32, 64, 128, 256)  # KV block sizes a kernel may forget the partial last one of


def diagnosis(output: torch.Tensor, expected: dict[str, torch.Tensor], policy: str, params: dict[str, float]) -> str:
    """What a failed check's reason says before its numbers: "looks like <mistake>; off in <where>; ".
    Naming the mistake needs the inputs (`expected.data`, as reference_outputs returns it)."""
    if not expected:
        return ""
    try:
        off = off_pairs(output, expected, policy, params)
        data = getattr(expected, "data", None)
        where = where_off(off, data[2] if data is not None else None)
        mistake = likely_mistake(output, expected, data, off) if data is not None else ""
    except Exception as exc:  # noqa: BLE001 - a reason that says less beats a judge that crashes
        return f"no diagnosis ({type(exc).__name__}: {exc}"[:120] + "); "
    return (f"looks like {mistake}; " if mistake else "") + f"{where}; "


def off_pairs(output: torch.Tensor, expected: dict[str, torch.Tensor], policy: str,
              params: dict[str, float]) -> torch.Tensor:
    """(rows, heads) bool: the (query row, head) pairs outside the policy's bound against every
    path it accepts (NaN counts as outside)."""
    if policy == "competition":
        outside = ~torch.isclose(output.float(), expected["kv=fp8,q=fp8"], rtol=params["rtol"], atol=params["atol"])
        return ~(outside.float().mean(-1) <= params["max_mismatch"])
    err = torch.stack([(output.float() - ref).norm(dim=-1) / ref.norm(dim=-1).clamp(min=1e-6)
                       for ref in expected.values()]).amin(0)
    return ~(err <= params["row_rel_l2"])


def _sequence_of_rows(qo_indptr: torch.Tensor, rows: int) -> torch.Tensor:
    bounds = qo_indptr[1:].long().cpu()
    return torch.searchsorted(bounds, torch.arange(rows), right=True)


def _some(noun: str, ids: list[int], total: int) -> str:
    """"all 16 heads", "head 3 (of 16)", "heads 0-3, 9 (of 16)"."""
    if len(ids) == total:
        return f"all {total} {noun}s"
    return f"{noun}{'s' if len(ids) > 1 else ''} {index_ranges(ids)} (of {total})"


def where_off(off: torch.Tensor, qo_indptr: Optional[torch.Tensor] = None) -> str:
    """Which sequences, heads and query rows hold the (row, head) pairs that are off, in one short
    phrase: "off in sequences 2, 5 (of 8), all 16 heads, query row 1 of each sequence's 2"."""
    rows, heads = off.shape
    off = off.cpu()
    if not bool(off.any()):
        return "no single (row, head) is over its bound: the error is spread thin"
    off_rows = off.any(1)
    heads_text = _some("head", off.any(0).nonzero().flatten().tolist(), heads)
    if qo_indptr is None:
        return f"off in {_some('row', off_rows.nonzero().flatten().tolist(), rows)}, {heads_text}"
    qo = qo_indptr.long().cpu()
    seq = _sequence_of_rows(qo, rows)
    text = f"off in {_some('sequence', seq[off_rows].unique().tolist(), len(qo) - 1)}, {heads_text}"
    q_lens = (qo[1:] - qo[:-1]).unique().tolist()
    if len(q_lens) == 1 and q_lens[0] > 1:
        positions = (torch.arange(rows) - qo[seq])[off_rows].unique().tolist()
        if len(positions) < q_lens[0]:
            plural = "s" if len(positions) > 1 else ""
            text += f", query row{plural} {index_ranges(positions)} of each sequence's {q_lens[0]}"
    return text


def likely_mistake(output: torch.Tensor, expected: dict[str, torch.Tensor], data: input_t, off: torch.Tensor) -> str:
    """The simple mistake that explains the output on (a sample of) the sequences that are off,
    or "" when none is clearly closer than the legitimate references."""
    qo = data[2].tolist()
    seq = _sequence_of_rows(data[2], off.shape[0])
    off_seqs = seq[off.cpu().any(1)].unique().tolist() or list(range(len(qo) - 1))
    pick = torch.linspace(0, len(off_seqs) - 1, min(len(off_seqs), DIAGNOSIS_SEQUENCES)).round().long()
    sample = [off_seqs[i] for i in pick.unique().tolist()]
    rows = torch.cat([torch.arange(qo[b], qo[b + 1]) for b in sample]).to(output.device)
    got = output[rows].float()
    # In the order ties go: an output of zeros is "all zeros", not a skipped block of 256.
    candidates = {"all zeros": {p: torch.zeros_like(got) for p in expected}}
    candidates.update(_mistaken_outputs(data, sample))
    candidates.update(_rows_of_other_sequences(got, expected, qo, sample))
    # Judged on the (row, head) pairs that are off, so a mistake made in some heads only is named
    # too; among the mistakes that explain those, the one closest on all sampled pairs (a causal
    # mask leaves the last query row right; skipping the last KV token does not).
    off_here = off[rows.cpu()].to(got.device)
    pairs = off_here if bool(off_here.any()) else torch.ones_like(off_here)
    sampled = {p: ref[rows] for p, ref in expected.items()}
    norms = {p: (ref.square().sum(-1)[pairs].sum().sqrt(), ref.norm()) for p, ref in sampled.items()}

    def distance(outputs: dict[str, torch.Tensor]) -> tuple[float, float]:
        """(rel L2 on the off pairs, rel L2 on all sampled pairs), each the best over paths."""
        per_path = []
        for p, c in outputs.items():
            sq = (got - c).square().sum(-1)
            errs = torch.stack([sq[pairs].sum().sqrt(), sq.sum().sqrt()])
            per_path.append(errs / torch.stack(norms[p]).clamp(min=1e-30))
        return tuple(torch.stack(per_path).amin(0).tolist())

    honest = distance(sampled)[0]
    scores = {name: distance(outputs) for name, outputs in candidates.items()}
    fits = [name for name, (d, _) in scores.items() if d <= MATCH_REL_L2 and d * MATCH_MARGIN <= honest]
    return min(fits, key=lambda name: scores[name][1]) if fits else ""


def _attend(qs: torch.Tensor, ks: torch.Tensor, scale: float, dims: int = QK_HEAD_DIM,
            values: Optional[torch.Tensor] = None, normalise: bool = True) -> torch.Tensor:
    """fp32 attention of query rows qs (n, H, 576) over key rows ks (L, 576), all heads at once."""
    values = ks[:, :V_HEAD_DIM] if values is None else values
    if ks.shape[0] == 0:
        return qs.new_zeros(qs.shape[0], qs.shape[1], V_HEAD_DIM)
    s = torch.einsum("qhd,kd->qhk", qs[..., :dims], ks[:, :dims]) * scale
    p = torch.exp(s - s.amax(-1, keepdim=True))
    out = torch.einsum("qhk,kd->qhd", p, values)
    return out / p.sum(-1, keepdim=True) if normalise else out


def _mistakes(qs: torch.Tensor, ks: torch.Tensor, next_ks: torch.Tensor, prev_ks: torch.Tensor,
              scale: float, tails: dict[str, int]) -> dict[str, torch.Tensor]:
    """One sequence's output under each simple mistake a kernel can make with the right data;
    `tails`: {name: block size} of the partial-last-block mistakes worth trying."""
    n, length = qs.shape[0], ks.shape[0]
    mean_v = ks[:, :V_HEAD_DIM].mean(0) if length else qs.new_zeros(V_HEAD_DIM)
    causal = [_attend(qs[j:j + 1], ks[:max(0, length - (n - 1 - j))], scale) for j in range(n)]
    return {
        "the last KV token of each sequence skipped": _attend(qs, ks[:-1], scale),
        "the first KV token of each sequence skipped": _attend(qs, ks[1:], scale),
        "softmax without sm_scale": _attend(qs, ks, 1.0),
        "sm_scale applied twice": _attend(qs, ks, scale * scale),
        "scores without the 64 RoPE dims": _attend(qs, ks, scale, dims=KV_LORA_RANK),
        "V from dims 64-575 instead of 0-511": _attend(qs, ks, scale, values=ks[:, -V_HEAD_DIM:]),
        "softmax not normalised (no division by the sum of exp)": _attend(qs, ks, scale, normalise=False),
        "the mean of V (every score the same)": mean_v.expand(n, qs.shape[1], V_HEAD_DIM),
        "each sequence attending to the next sequence's KV rows": _attend(qs, next_ks, scale),
        "each sequence attending to the previous sequence's KV rows": _attend(qs, prev_ks, scale),
        "a causal mask over the query rows (this task has none)": torch.cat(causal),
        **{name: _attend(qs, ks[:length - length % block], scale) for name, block in tails.items()},
    }


def _tail_blocks(lengths: list[int]) -> dict[str, int]:
    """{mistake name: block size} for skipping each sequence's partial last KV block: one per
    distinct outcome on these lengths (blocks that keep the same rows are named together), none
    where nothing or everything is dropped (that is the right answer, or all zeros)."""
    kept: dict[tuple[int, ...], list[int]] = {}
    for block in TAIL_BLOCKS:
        kept.setdefault(tuple(n - n % block for n in lengths), []).append(block)
    names = {}
    for rows, blocks in kept.items():
        if rows != tuple(lengths) and any(rows):
            sizes = ", ".join(map(str, blocks[:-1])) + (" or " if len(blocks) > 1 else "") + str(blocks[-1])
            names[f"each sequence's partial last KV block skipped (blocks of {sizes})"] = blocks[0]
    return names


def _decodings(kv_data: dict, fmt: str, index: torch.Tensor) -> Iterator[tuple[str, torch.Tensor]]:
    """KV rows `index` as format `fmt` holds them (name ""), then as kernels misreading that format
    see them (name: the misreading), each (n, 576) float32, one at a time (each is as large as
    the sampled sequences' KV rows in fp32)."""
    if fmt == "fp8":
        codes, scale = kv_data["fp8"]
        codes = codes[index].reshape(-1, QK_HEAD_DIM)
        other = torch.float8_e4m3fnuz if codes.dtype == torch.float8_e4m3fn else torch.float8_e4m3fn
        named = {t: str(t).removeprefix("torch.") for t in (codes.dtype, other)}
        yield "", dequantize_fp8(codes, scale)
        yield "fp8 KV without its per-tensor scale", codes.float()
        yield (f"fp8 KV bytes decoded as {named[other]} (they are {named[codes.dtype]})",
               dequantize_fp8(codes.view(other), scale).nan_to_num(0.0, 0.0, 0.0))
    elif fmt == "mxfp4":
        packed, scales = kv_data["mxfp4"]
        codes, live = packed[index].reshape(-1, QK_HEAD_DIM // 2), scales[index]
        blocks = QK_HEAD_DIM // 32
        at_stride_18 = index.unsqueeze(1) * blocks + torch.arange(blocks, device=index.device)
        dense = scales.view(torch.uint8).reshape(-1)[at_stride_18].view(scales.dtype)
        yield "", dequantize_mxfp4(codes, live)
        yield ("mxfp4 KV without its e8m0 block scales",
               dequantize_mxfp4(codes, torch.full_like(live.view(torch.uint8), 127).view(scales.dtype)))
        yield ("mxfp4 nibbles swapped (the low nibble is the even element)",
               dequantize_mxfp4((codes >> 4) | (codes << 4), live))
        yield "mxfp4 scales read with a row stride of 18 (they are stored with 24)", dequantize_mxfp4(codes, dense)
    else:
        yield "", dequantized_kv(kv_data, fmt)[index].reshape(-1, QK_HEAD_DIM)


def _mistaken_outputs(data: input_t, sample: list[int]) -> dict[str, dict[str, torch.Tensor]]:
    """{mistake: {path: output rows of the `sample` sequences}}: every simple mistake, on every
    legitimate precision path (a mistake and a precision path can come together)."""
    q, kv_data, qo_indptr, kv_indptr, config = data
    qo, kvp, batch, heads = qo_indptr.tolist(), kv_indptr.tolist(), len(qo_indptr) - 1, q.shape[1]
    queries = torch.cat([quantized_q(q, qp, kv_data["fp8"][0].dtype) for qp in Q_PRECISIONS], dim=1)
    needed = sorted({n for s in sample for n in (s, (s + 1) % batch, (s - 1) % batch)})
    span, at = {}, 0
    for b in needed:  # where each needed sequence's KV rows sit among the gathered ones
        span[b], at = slice(at, at + kvp[b + 1] - kvp[b]), at + kvp[b + 1] - kvp[b]
    index = torch.cat([torch.arange(kvp[b], kvp[b + 1]) for b in needed]).to(q.device)
    tails = _tail_blocks([kvp[s + 1] - kvp[s] for s in sample])
    found: dict[str, dict[str, list[torch.Tensor]]] = {}
    for fmt in kv_data:
        for misreading, keys in _decodings(kv_data, fmt, index):
            for s in sample:
                qs, ks = queries[qo[s]:qo[s + 1]], keys[span[s]]
                outs = ({misreading: _attend(qs, ks, config["sm_scale"])} if misreading else
                        _mistakes(qs, ks, keys[span[(s + 1) % batch]], keys[span[(s - 1) % batch]],
                                  config["sm_scale"], tails))
                for name, rows in outs.items():
                    found.setdefault(name, {}).setdefault(fmt, []).append(rows)
    return {name: {f"kv={fmt},q={qp}": torch.cat(parts)[:, i * heads:(i + 1) * heads]
                   for fmt, parts in by_format.items() for i, qp in enumerate(Q_PRECISIONS)}
            for name, by_format in found.items()}


def _rows_of_other_sequences(got: torch.Tensor, expected: dict[str, torch.Tensor], qo: list[int],
                             sample: list[int]) -> dict[str, dict[str, torch.Tensor]]:
    """The mistake "each sequence's rows hold another sequence's answer" (an indptr mix-up): for
    each sampled sequence, the other sequence whose reference rows its output is nearest to."""
    batch = len(qo) - 1
    if batch < 2 or len({b - a for a, b in zip(qo, qo[1:])}) != 1:
        return {}
    mine = got.reshape(len(sample), -1)
    theirs = {p: ref.reshape(batch, -1) for p, ref in expected.items()}
    dist = torch.stack([torch.cdist(mine, t) for t in theirs.values()]).amin(0)
    dist[torch.arange(len(sample), device=dist.device), torch.tensor(sample, device=dist.device)] = float("inf")
    nearest = dist.argmin(1).to(got.device)
    name = f"rows holding another sequence's answer (sequence {sample[0]} has {int(nearest[0])}'s)"
    return {name: {p: t[nearest].reshape(got.shape) for p, t in theirs.items()}}


# ---------------------------------------------------------------- the check's self-test
def simulated_kernel(data: input_t, kv_format: str, q_precision: str) -> torch.Tensor:
    """What an honest kernel computes on a given precision path: the operands exactly (fp8 q as
    its codes, the scale applied in fp32), fp32 scores and accumulation, P rounded to bf16 before
    P·V, output rounded to bf16."""
    q, kv_data, qo_indptr, kv_indptr, config = data
    qf = quantized_q(q, q_precision, kv_data["fp8"][0].dtype)
    kf = dequantized_kv(kv_data, kv_format).reshape(-1, QK_HEAD_DIM)

    def attend(qs: torch.Tensor, ks: torch.Tensor) -> torch.Tensor:
        s = torch.einsum("qhd,kd->qhk", qs, ks) * config["sm_scale"]
        p = torch.exp(s - s.amax(-1, keepdim=True))
        return torch.einsum("qhk,kd->qhd", p.bfloat16().float(), ks[:, :V_HEAD_DIM]) / p.sum(-1, keepdim=True)

    return per_sequence(qf, kf, qo_indptr, kv_indptr, attend).bfloat16()


def _attend_subset(data: input_t, keep: torch.Tensor, dims: int = QK_HEAD_DIM) -> torch.Tensor:
    """fp32 attention over the KV rows where `keep` is true, scores from the first `dims` dims."""
    q, kv_data, qo_indptr, kv_indptr, config = data

    def attend(qs: torch.Tensor, ks: torch.Tensor) -> torch.Tensor:
        s = torch.einsum("qhd,kd->qhk", qs[..., :dims], ks[:, :dims]) * config["sm_scale"]
        return torch.einsum("qhk,kd->qhd", torch.softmax(s, -1), ks[:, :V_HEAD_DIM])

    keys = kv_data["bf16"].float().reshape(-1, QK_HEAD_DIM)
    return per_sequence(q.float(), keys, qo_indptr, kv_indptr, attend, keep).bfloat16()


def selftest_outputs(data: input_t, other: input_t, seed: int) -> dict[str, tuple[torch.Tensor, bool]]:
    """Outputs the check must accept (every legitimate precision path) and must reject (cheap
    wrong answers), as {name: (output, should_pass)}. `other` holds another seed's inputs."""
    q, kv_data, qo_indptr, kv_indptr, config = data
    out = {f"honest kv={fmt},q={qp}": (simulated_kernel(data, fmt, qp), True)
           for fmt in kv_data for qp in Q_PRECISIONS}
    total_kv, dev = kv_data["bf16"].shape[0], q.device
    lengths = (kv_indptr[1:] - kv_indptr[:-1]).tolist()
    pos = torch.cat([torch.arange(n, device=dev) for n in lengths]) if total_kv else torch.zeros(0, device=dev)
    seq_len = torch.cat([torch.full((n,), n, device=dev) for n in lengths]) if total_kv else pos
    gen = torch.Generator(device="cpu").manual_seed(seed)
    # keep at most 95% of each sequence: drop ceil(5%) of its tokens (for a 1-token sequence, all of it)
    n_drop = torch.ceil(seq_len * 0.05)
    noise = torch.rand(total_kv, generator=gen).to(dev)
    rank = torch.empty(total_kv, device=dev)
    for start, n in zip(kv_indptr[:-1].tolist(), lengths):   # random rank of each token in its sequence
        rank[start:start + n] = torch.argsort(torch.argsort(noise[start:start + n])).float()
    zeros = torch.zeros(q.shape[0], q.shape[1], V_HEAD_DIM, dtype=torch.bfloat16, device=dev)
    uniform = _attend_subset((q * 0, *data[1:]), torch.ones(total_kv, dtype=torch.bool, device=dev))
    out.update({
        "null zeros": (zeros, False),
        "null mean of V": (uniform, False),
        "null scores without the 64 RoPE dims": (_attend_subset(data, pos >= 0, KV_LORA_RANK), False),
        "null first 95% of tokens": (_attend_subset(data, pos < seq_len - n_drop), False),
        "null last 95% of tokens": (_attend_subset(data, pos >= n_drop), False),
        "null random 95% of tokens": (_attend_subset(data, rank >= n_drop), False),
        "null another seed's answer": (ref_kernel(other), False),
    })
    return out


def output_layout(data: input_t) -> tuple[tuple[int, ...], torch.dtype]:
    q = data[0]
    return (q.shape[0], q.shape[1], V_HEAD_DIM), torch.bfloat16


def bytes_moved(data: input_t) -> dict[str, int]:
    """Bytes a kernel reading each KV format (or two of them) must move at least: its KV once, q
    once, the output once."""
    q, kv_data, qo_indptr, kv_indptr, config = data
    qo_bytes = q.numel() * q.element_size() + q.shape[0] * q.shape[1] * V_HEAD_DIM * 2
    index_bytes = (qo_indptr.numel() + kv_indptr.numel()) * 4
    total_kv = kv_data["bf16"].shape[0]
    kv_bytes = {
        "bf16": total_kv * QK_HEAD_DIM * 2,
        "fp8": total_kv * QK_HEAD_DIM + 4,
        "mxfp4": total_kv * (QK_HEAD_DIM // 2 + QK_HEAD_DIM // 32),  # packed codes + 18 live scales
    }
    # two formats ("mxfp4+fp8"): keys (all 576 dims) from one, values (the first 512) from the other,
    # whichever order moves fewer bytes
    for a, b in (("bf16", "fp8"), ("bf16", "mxfp4"), ("fp8", "mxfp4")):
        kv_bytes[f"{a}+{b}"] = min(kv_bytes[a] + kv_bytes[b] * V_HEAD_DIM // QK_HEAD_DIM,
                                   kv_bytes[b] + kv_bytes[a] * V_HEAD_DIM // QK_HEAD_DIM)
    return {fmt: n + qo_bytes + index_bytes for fmt, n in kv_bytes.items()}


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
    from harness.task.spec import load_task

    check = load_task(Path(__file__).with_name("task.yml")).check
    return check_output(output, reference_outputs(data), check.policy, check.policies[check.policy])
