#!POPCORN leaderboard amd-mixed-mla
"""Is: an honest submission that replays a CUDA graph, as serving stacks do for decode. For each
distinct input layout (the shapes, dtypes and device of q, the bf16 KV cache and the indptrs, and
the config values the kernels are sized by) it captures, once, a graph of about 90 small kernels
that read static input buffers: the index maps built on the device from the static qo_indptr /
kv_indptr (lengths, repeat_interleave, searchsorted, positions, a validity mask), the bf16 KV rows
and query rows scattered into padded fp32 blocks, then the attention head pair by head pair (8
pairs: gather, bmm, scale, mask, softmax, nan_to_num, bmm, store) and the rows gathered back. Every call copies
its own q, KV cache, qo_indptr and kv_indptr into the static buffers (device-to-device copies, so
they are part of the call's GPU work), replays the graph and returns a fresh copy of the graph's
output: all the work happens inside the call and the result depends on the call's inputs only;
no output is ever reused. No host synchronisation after the capture. fp32 scores, softmax and
accumulation on the bf16 KV cache; bf16 output (total_q, 16, 512). At most MAX_GRAPHS layouts are
kept (least recently used dropped). Without CUDA (the CPU), or while a caller is itself capturing
a graph (the harness's --graph), the same kernels run eagerly on the call's inputs.

Must get: passes every case; ranked within 5% of the GPU time an independent CUPTI trace shows
(lab/cupti_compare.py: ranked median at most 5% above the CUPTI span of the call, copies
included, and not more than 5% below its kernel time), on the H200 with the parent's fence. In
CUPTI its kernels are graph-launched (one cudaGraphLaunch per call) and its input copies are
memcpy activities, not kernels.
"""

from collections import OrderedDict

import torch
from task import input_t, output_t

HEAD_GROUP = 2   # heads per bmm: 8 groups of 8 kernels each
MAX_GRAPHS = 4   # captured layouts kept (each holds its static inputs and its memory pool)

_graphs: "OrderedDict[tuple, _Captured]" = OrderedDict()


def _attention(q: torch.Tensor, kv: torch.Tensor, qo_indptr: torch.Tensor, kv_indptr: torch.Tensor,
               max_q: int, max_kv: int, v_dim: int, sm_scale: float) -> torch.Tensor:
    """softmax(q·kᵀ·sm_scale)·v per sequence, fp32, from device-side index maps: no host reads, so
    it can be captured. q (total_q, H, 576) bf16, kv (total_kv, 1, 576) bf16 -> (total_q, H, v_dim) bf16."""
    dev = q.device
    total_q, heads, dim = q.shape
    total_kv = kv.shape[0]
    batch = qo_indptr.numel() - 1
    qo, kvp = qo_indptr.long(), kv_indptr.long()
    q_lens, kv_lens = qo[1:] - qo[:-1], kvp[1:] - kvp[:-1]
    q_seq = torch.repeat_interleave(torch.arange(batch, device=dev), q_lens, output_size=total_q)
    q_pos = torch.arange(total_q, device=dev) - qo[q_seq]
    tokens = torch.arange(total_kv, dtype=kv_indptr.dtype, device=dev)
    kv_seq = torch.searchsorted(kv_indptr[1:].contiguous(), tokens, right=True)
    kv_pos = tokens.long() - kvp[kv_seq]
    masked = (torch.arange(max_kv, device=dev)[None, :] >= kv_lens[:, None])[:, None, :]  # (B, 1, max_kv)

    keys = torch.zeros(batch, max_kv, dim, dtype=torch.float32, device=dev)
    keys[kv_seq, kv_pos] = kv[:, 0].float()
    queries = torch.zeros(batch, max_q, heads, dim, dtype=torch.float32, device=dev)
    queries[q_seq, q_pos] = q.float()
    keys_t, values = keys.transpose(1, 2), keys[..., :v_dim]

    out = torch.empty(batch, max_q, heads, v_dim, dtype=torch.float32, device=dev)
    for h0 in range(0, heads, HEAD_GROUP):
        g = min(HEAD_GROUP, heads - h0)
        scores = torch.bmm(queries[:, :, h0:h0 + g].reshape(batch, max_q * g, dim), keys_t)
        scores.mul_(sm_scale)
        scores.masked_fill_(masked, float("-inf"))
        probs = torch.softmax(scores, dim=-1).nan_to_num_(0.0)  # a sequence with no KV rows gives zeros
        out[:, :, h0:h0 + g] = torch.bmm(probs, values).view(batch, max_q, g, v_dim)
    return out[q_seq, q_pos].to(torch.bfloat16)


class _Captured:
    """One layout's graph: static inputs, the graph that reads them, its static output."""

    def __init__(self, inputs: tuple, sizes: tuple):
        self.inputs = tuple(t.clone() for t in inputs)   # this call's values: the warm-up reads valid indices
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):                    # warm-up on a side stream, as capture requires
            for _ in range(2):
                _attention(*self.inputs, *sizes)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.out = _attention(*self.inputs, *sizes)

    def __call__(self, inputs: tuple) -> torch.Tensor:
        for static, fresh in zip(self.inputs, inputs):
            static.copy_(fresh)
        self.graph.replay()
        return self.out.clone()


def custom_kernel(data: input_t) -> output_t:
    q, kv_data, qo_indptr, kv_indptr, config = data
    inputs = (q, kv_data["bf16"], qo_indptr, kv_indptr)
    sizes = (int(config["q_seq_len"]), int(config["kv_seq_len"]), int(config["kv_lora_rank"]),
             float(config["sm_scale"]))
    if q.device.type != "cuda" or torch.cuda.is_current_stream_capturing():
        return _attention(*inputs, *sizes)
    key = tuple((tuple(t.shape), t.dtype, t.device) for t in inputs) + sizes
    captured = _graphs.get(key)
    if captured is None:
        while len(_graphs) >= MAX_GRAPHS:
            _graphs.popitem(last=False)
        captured = _graphs[key] = _Captured(inputs, sizes)
    _graphs.move_to_end(key)
    return captured(inputs)
