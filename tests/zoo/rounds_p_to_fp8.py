"""Tries: P in fp8 for P·V, as an fp8 tensor-core product would take it (twice the bf16 rate, and
the fp8 cache's own codes as V). Scores, softmax and its sum are fp32 on the fp8 KV; only P is
rounded to e4m3 (scaled by 448 first), where the contract allows bf16 at the coarsest: an error of
~1% rel L2 and 2.5-4% in the worst (row, head) (red-team pass 11, session 13).
Must get: rejected (output differs from the reference)."""
import torch


def custom_kernel(data):
    q, kv_data, qo_indptr, kv_indptr, config = data
    codes, scale = kv_data["fp8"]
    keys = codes.float().flatten(1) * scale.float()
    values = codes.flatten(1)[:, :512].float()             # unscaled fp8 codes
    out = torch.zeros(q.shape[0], q.shape[1], 512, dtype=torch.float32, device=q.device)
    qo, kvp = qo_indptr.tolist(), kv_indptr.tolist()
    for b in range(len(qo) - 1):
        ks = keys[kvp[b]:kvp[b + 1]]
        if ks.shape[0] == 0:
            continue
        s = torch.einsum("qhd,kd->qhk", q[qo[b]:qo[b + 1]].float(), ks) * config["sm_scale"]
        p = torch.exp(s - s.amax(-1, keepdim=True))
        p8 = (p * 448.0).to(codes.dtype).float()
        pv = torch.einsum("qhk,kd->qhd", p8, values[kvp[b]:kvp[b + 1]])
        out[qo[b]:qo[b + 1]] = pv * (scale.float() / 448.0) / p.sum(-1, keepdim=True)
    return out.to(torch.bfloat16)
