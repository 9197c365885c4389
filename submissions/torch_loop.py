#!POPCORN leaderboard amd-mixed-mla
"""Per-sequence baseline, in the style of many competition entries: a Python loop over the batch.

Easy to read and obviously right for ragged lengths, but it launches a few kernels per sequence
and syncs to read the lengths, so it is slow for large batches. Reads the bf16 KV cache.
"""

import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    q, kv_data, qo_indptr, kv_indptr, config = data
    kv = kv_data["bf16"]
    v_dim = config["kv_lora_rank"]
    out = torch.empty(q.shape[0], q.shape[1], v_dim, dtype=torch.bfloat16, device=q.device)
    qo, kvp = qo_indptr.tolist(), kv_indptr.tolist()
    for b in range(len(qo) - 1):
        qb = q[qo[b]:qo[b + 1]].float()                 # (q_len, H, 576)
        kb = kv[kvp[b]:kvp[b + 1], 0].float()           # (L, 576)
        if kb.shape[0] == 0:
            out[qo[b]:qo[b + 1]] = 0
            continue
        scores = torch.einsum("qhd,ld->qhl", qb, kb) * config["sm_scale"]
        probs = torch.softmax(scores, dim=-1)
        out[qo[b]:qo[b + 1]] = torch.einsum("qhl,ld->qhd", probs, kb[:, :v_dim]).to(torch.bfloat16)
    return out
