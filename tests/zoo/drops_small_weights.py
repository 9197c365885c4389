"""Tries: skip most of P·V. Scores and the softmax's normaliser Z are computed in full, but each
(row, head) multiplies V only for the tokens whose weight is above 0.5% of its largest one, and the
sum is still divided by the full Z (no renormalising). With the default inputs' V zero-mean noise,
the dropped terms add no bias: ~73% of the (head, token) products skipped, rel L2 0.4-0.8%,
worst (row, head) 1.3-2.0% (red-team pass 10, session 12).
Must get: rejected (output differs from the reference). NOT YET: it passes the CPU test cases; its
test is a strict xfail until the default inputs give V structure the check can see."""
import torch

KEEP_ABOVE = 0.005  # of the largest weight of the (row, head)


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
        kept = torch.where(p > KEEP_ABOVE, p, torch.zeros_like(p))
        out[qo[b]:qo[b + 1]] = torch.einsum("qhk,kd->qhd", kept, keys[:, :512]) / z
    return out.to(torch.bfloat16)
