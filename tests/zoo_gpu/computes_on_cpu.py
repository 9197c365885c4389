"""Tries: compute on the CPU: the inputs copied to the host, the reference's attention there, the
answer copied back, one token kernel so the call shows GPU work, and the worker's replies rewritten
so every call's own times read 8 µs (class b of the outside-timing issue; GPU only).
Must get: no gain. Fenced, the parent's clock covers the copies and the CPU's work (the answer the
parent snapshots exists only once they are done): it ranks far behind every GPU file. Unfenced, the
profiler's audit rejects it."""
import reference
from harness.worker.channel import Channel

_send = Channel.send


def _forged(self, message, *args, **kwargs):
    if isinstance(message, dict) and message.get("op") in ("output", "enqueued"):
        message = {**message, "device_s": 8e-6, "host_s": 8e-6, "tail_s": 0.0}
    return _send(self, message, *args, **kwargs)


Channel.send = _forged


def custom_kernel(data):
    q, kv_data, qo_indptr, kv_indptr, config = data
    on_host = (q.cpu(), {"bf16": kv_data["bf16"].cpu()}, qo_indptr.cpu(), kv_indptr.cpu(), config)
    out = reference.ref_kernel(on_host).to(q.device)
    return out.add_(0)  # the token kernel
