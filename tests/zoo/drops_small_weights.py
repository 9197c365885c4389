"""Tries: skip P·V for the tokens that are negligible in every head. Scores and the softmax's
normaliser Z are computed in full; a token whose weight is below 10% of the largest in all 16 heads
of its row is left out of P·V (the skipping a kernel that computes the heads together can profit
from) and its weight is given to the mean of V instead, so no bias shows; the sum is divided by the
full Z. On the default inputs' broadest heads (score std ~1) such tokens carry weight the check sees.
Must get: rejected (output differs from the reference)."""
import torch

KEEP_ABOVE = 0.1  # of the largest weight of the (row, head)


def used(p):
    """(rows, heads, tokens) weights, largest 1 per (row, head) -> the tokens P·V reads: those above
    the line in some head of their row."""
    return (p > KEEP_ABOVE).any(1, keepdim=True).expand_as(p)


def custom_kernel(data):
    q, kv_data, qo_indptr, kv_indptr, config = data
    kv = kv_data["bf16"].float().flatten(1)
    out = torch.zeros(q.shape[0], q.shape[1], 512, dtype=torch.float32, device=q.device)
    qo, kvp = qo_indptr.tolist(), kv_indptr.tolist()
    for b in range(len(qo) - 1):
        keys = kv[kvp[b]:kvp[b + 1]]
        if keys.shape[0] == 0:
            continue
        scores = torch.einsum("qhd,kd->qhk", q[qo[b]:qo[b + 1]].float(), keys) * config["sm_scale"]
        p = torch.exp(scores - scores.amax(-1, keepdim=True))  # the largest weight is 1
        z = p.sum(-1, keepdim=True)
        kept = torch.where(used(p), p, torch.zeros_like(p))
        values = keys[:, :512]
        pv = torch.einsum("qhk,kd->qhd", kept, values) + (z - kept.sum(-1, keepdim=True)) * values.mean(0)
        out[qo[b]:qo[b + 1]] = pv / z
    return out.to(torch.bfloat16)
