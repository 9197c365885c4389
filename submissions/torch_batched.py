"""Readable baseline: the whole batch in a few fp32 tensor ops.

Reads the bf16 KV cache. Ragged batches are padded to the longest sequence and masked, so the
work is a handful of batched matrix products however the lengths vary. Every step is plain
PyTorch: a starting point to beat, not a fast kernel.
"""

import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    q, kv_data, qo_indptr, kv_indptr, config = data
    sm_scale = config["sm_scale"]
    v_dim = config["kv_lora_rank"]
    batch = qo_indptr.numel() - 1
    q_len = config["q_seq_len"]
    heads = q.shape[1]

    kv = kv_data["bf16"][:, 0, :].float()                      # (total_kv, 576)
    kv_lens = kv_indptr[1:] - kv_indptr[:-1]                    # (B,)
    max_len = int(kv_lens.max())
    # Gather each sequence's rows into a padded (B, max_len, 576) block; padding is masked below.
    pos = torch.arange(max_len, device=q.device)
    valid = pos[None, :] < kv_lens[:, None]                     # (B, max_len)
    rows = (kv_indptr[:-1, None] + pos[None, :]).clamp(max=max(kv.shape[0] - 1, 0))
    keys = kv[rows] * valid[..., None]                          # (B, max_len, 576)

    queries = q.float().view(batch, q_len * heads, -1)          # (B, q_len*H, 576)
    scores = torch.bmm(queries, keys.transpose(1, 2)) * sm_scale
    scores = scores.masked_fill(~valid[:, None, :], float("-inf"))
    probs = torch.softmax(scores, dim=-1).nan_to_num(0.0)       # an empty sequence gives zeros
    out = torch.bmm(probs, keys[..., :v_dim])                   # (B, q_len*H, 512)
    return out.view(batch * q_len, heads, v_dim).to(torch.bfloat16)
