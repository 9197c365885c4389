#!POPCORN leaderboard amd-mixed-mla
"""Tries: a wrong kernel in the competition's style: it attends to each sequence's first 95% of
tokens only, as a kernel that drops the last partial tiles would (the newest tokens are lost).
Must get: passes `--task competition` (the competition's inputs and check accept it: at most 5% of
the elements may be off by more than 0.1 + 0.1·|expected|), with the run's warning that this check
passes such answers; fails the default task and `--check strict`."""
import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    q, kv_data, qo_indptr, kv_indptr, config = data
    v_dim = config["kv_lora_rank"]
    kv = kv_data["bf16"][:, 0].float()
    out = torch.empty(q.shape[0], q.shape[1], v_dim, dtype=torch.bfloat16, device=q.device)
    for b in range(kv_indptr.numel() - 1):
        qs, qe = int(qo_indptr[b]), int(qo_indptr[b + 1])
        ks, ke = int(kv_indptr[b]), int(kv_indptr[b + 1])
        keys = kv[ks:ke - max(1, (ke - ks) // 20)]                 # the last 5% of the tokens left out
        scores = torch.einsum("qhd,kd->qhk", q[qs:qe].float(), keys) * config["sm_scale"]
        out[qs:qe] = torch.einsum("qhk,kd->qhd", torch.softmax(scores, dim=-1), keys[:, :v_dim]).to(torch.bfloat16)
    return out
