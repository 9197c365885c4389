#!POPCORN leaderboard amd-mixed-mla
"""Written as many amd-mixed-mla entries were: it assumes the competition's shapes (one query row
per sequence, every sequence the same length), so it reshapes the KV cache to (batch, length, 576)
and never reads qo_indptr. It passes the competition's cases (`--task competition`) and fails the
default task's q_seq_len > 1 and ragged tests; there the report must say that it passes the
competition's test cases."""
import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    q, kv_data, qo_indptr, kv_indptr, config = data
    batch = kv_indptr.numel() - 1
    length = int(kv_indptr[1] - kv_indptr[0])
    kv = kv_data["bf16"][: batch * length, 0].float().reshape(batch, length, -1)
    v_dim = config["kv_lora_rank"]
    qb = q[:batch].float()                                       # (batch, heads, 576): one row each
    scores = torch.einsum("bhd,bld->bhl", qb, kv) * config["sm_scale"]
    out = torch.einsum("bhl,bld->bhd", torch.softmax(scores, dim=-1), kv[..., :v_dim])
    full = torch.zeros(q.shape[0], q.shape[1], v_dim, dtype=torch.bfloat16, device=q.device)
    full[:batch] = out.to(torch.bfloat16)
    return full
