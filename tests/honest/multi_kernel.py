#!POPCORN leaderboard amd-mixed-mla
"""Is: an honest submission shaped like a production decode path: every call does all of its own
work from the call's inputs, in a few dozen small kernels and no host synchronisation. It builds
its index maps from qo_indptr / kv_indptr on the device each call (lengths, a per-query-row
sequence id with repeat_interleave, a per-KV-token sequence id with searchsorted, positions within
the sequence, a validity mask), scatters the bf16 KV rows and the query rows into padded fp32
blocks, then runs the attention head-group by head-group (4 groups of 4 heads: gather, bmm, scale,
mask, softmax, bmm, store) and gathers the rows back: about 60 GPU launches per call.
fp32 scores, softmax and accumulation on the bf16 KV cache; bf16 output (total_q, 16, 512).
Nothing is cached between calls; the sizes it pads to come from the inputs' shapes and the
config's ints (q_seq_len, kv_seq_len: the longest sequence), so no value is read back to the host.

Must get: passes every case; ranked within 5% of the GPU time an independent CUPTI trace shows
(lab/cupti_compare.py: ranked median at most 5% above the CUPTI span of the call and not more
than 5% below its kernel time), on the H200 with the parent's fence. Its launches are queued
before the clock starts, so none of its ~60 launch latencies may appear in the ranked time.
"""

import torch
from task import input_t, output_t

HEAD_GROUP = 4  # heads per bmm


def custom_kernel(data: input_t) -> output_t:
    q, kv_data, qo_indptr, kv_indptr, config = data
    kv = kv_data["bf16"]                                    # (total_kv, 1, 576) bf16
    dev = q.device
    total_q, heads, dim = q.shape
    total_kv = kv.shape[0]
    batch = qo_indptr.numel() - 1
    max_q, max_kv = int(config["q_seq_len"]), int(config["kv_seq_len"])
    v_dim = int(config["kv_lora_rank"])
    sm_scale = float(config["sm_scale"])

    # ---- index building, on the device, from this call's indptrs
    qo, kvp = qo_indptr.long(), kv_indptr.long()
    q_lens = qo[1:] - qo[:-1]                               # (B,)
    kv_lens = kvp[1:] - kvp[:-1]                            # (B,)
    q_seq = torch.repeat_interleave(torch.arange(batch, device=dev), q_lens, output_size=total_q)
    q_pos = torch.arange(total_q, device=dev) - qo[q_seq]   # row of each query within its sequence
    tokens = torch.arange(total_kv, dtype=kv_indptr.dtype, device=dev)
    kv_seq = torch.searchsorted(kv_indptr[1:].contiguous(), tokens, right=True)  # sequence of each KV row
    kv_pos = tokens.long() - kvp[kv_seq]                    # position of each KV row within its sequence
    valid = torch.arange(max_kv, device=dev)[None, :] < kv_lens[:, None]         # (B, max_kv)
    masked = ~valid[:, None, :]                             # (B, 1, max_kv)

    # ---- padded fp32 operands
    keys = torch.zeros(batch, max_kv, dim, dtype=torch.float32, device=dev)
    keys[kv_seq, kv_pos] = kv[:, 0].float()                 # (B, max_kv, 576); [..., :512] are values
    queries = torch.zeros(batch, max_q, heads, dim, dtype=torch.float32, device=dev)
    queries[q_seq, q_pos] = q.float()
    keys_t = keys.transpose(1, 2)
    values = keys[..., :v_dim]

    # ---- attention, one head group at a time
    out = torch.empty(batch, max_q, heads, v_dim, dtype=torch.float32, device=dev)
    for h0 in range(0, heads, HEAD_GROUP):
        g = min(HEAD_GROUP, heads - h0)
        qg = queries[:, :, h0:h0 + g].reshape(batch, max_q * g, dim)
        scores = torch.bmm(qg, keys_t)                      # (B, max_q*g, max_kv) fp32
        scores.mul_(sm_scale)
        scores.masked_fill_(masked, float("-inf"))
        probs = torch.softmax(scores, dim=-1).nan_to_num_(0.0)  # a sequence with no KV rows gives zeros
        out[:, :, h0:h0 + g] = torch.bmm(probs, values).view(batch, max_q, g, v_dim)
    return out[q_seq, q_pos].to(torch.bfloat16)             # (total_q, 16, 512)
