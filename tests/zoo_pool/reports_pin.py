"""Honest (fp32 torch), and prints which GPU it was pinned to, into its own log."""
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
