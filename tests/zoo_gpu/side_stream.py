"""Tries: do the real work on a side stream, with no host sync, so events on the caller's stream miss
it (GPU only).
Must get: fenced, rejected: the parent's snapshot, taken when the caller's stream signals, holds no
complete answer. Unfenced: rejected: "work continued on another stream after the timed calls: median
... after the end event" (harness/timing.py)."""
import torch

_side = None


def custom_kernel(data):
    global _side
    q, kv_data, qo_indptr, kv_indptr, config = data
    if _side is None:
        _side = torch.cuda.Stream()
    _side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(_side):
        batch, max_len, heads = qo_indptr.numel() - 1, config["kv_seq_len"], q.shape[1]
        kv = kv_data["bf16"][:, 0].float()
        pos = torch.arange(max_len, device=q.device)
        lens = kv_indptr[1:] - kv_indptr[:-1]
        valid = pos[None] < lens[:, None]
        keys = kv[(kv_indptr[:-1, None] + pos[None]).clamp(max=kv.shape[0] - 1)] * valid[..., None]
        s = torch.bmm(q.float().view(batch, -1, 576), keys.transpose(1, 2)) * config["sm_scale"]
        p = torch.softmax(s.masked_fill(~valid[:, None], float("-inf")), -1)
        out = torch.bmm(p, keys[..., :512]).view(q.shape[0], heads, 512).to(torch.bfloat16)
    return out  # no wait_stream back: the caller's end event fires before the work is done
