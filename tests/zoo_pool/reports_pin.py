"""Tries: nothing hostile: an honest fp32 torch kernel that prints which GPU it was pinned to
(CUDA_VISIBLE_DEVICES) into its own log.
Must get: passes; each evaluator's copy logs its own GPU ("pinned to: '0'", "'1'", "'2'")."""
import os

import torch

print("pinned to:", repr(os.environ.get("CUDA_VISIBLE_DEVICES")), flush=True)


def custom_kernel(data):
    q, kv_data, qo_indptr, kv_indptr, config = data
    kv = kv_data["bf16"][:, 0].float()
    out = torch.empty(q.shape[0], q.shape[1], 512, dtype=torch.bfloat16, device=q.device)
    qo, kvi = qo_indptr.tolist(), kv_indptr.tolist()
    for b in range(len(qo) - 1):
        k = kv[kvi[b]:kvi[b + 1]]
        s = torch.einsum("qhd,nd->qhn", q[qo[b]:qo[b + 1]].float(), k) * config["sm_scale"]
        out[qo[b]:qo[b + 1]] = torch.einsum("qhn,nd->qhd", s.softmax(-1), k[:, :512]).to(torch.bfloat16)
    return out
