"""Probe: which cross-process fences work between the parent and a worker inside the bubblewrap
sandbox (its own PID, IPC and network namespaces), and what each costs.

  A. CUDA IPC events: the parent's GATE (it records), the worker's DONE (it records).
  B. Stream memory operations (cuStreamWaitValue32 / cuStreamWriteValue32) in one process.
  C. The same across the sandbox, on memory shared as a file descriptor (harness/worker/shared_memory.py).
Each part runs in a child with a deadline, so a hang costs that part only.
Usage (GPU machine): python lab/fence_sandbox_probe.py
"""

from __future__ import annotations

import base64
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WORKER = r"""
import base64, json, socket, sys, time, ctypes
sys.path.insert(0, sys.argv[2])
import torch
sock = socket.socket(fileno=int(sys.argv[1])); f = sock.makefile("rw")
def send(m): f.write(json.dumps(m) + "\n"); f.flush()
def recv(): return json.loads(f.readline())
torch.zeros(1, device="cuda")
mode = recv()["mode"]
buf = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
if mode == "events":
    gate = torch.cuda.Event.from_ipc_handle(0, base64.b64decode(recv()["gate"]))
    done = torch.cuda.Event(interprocess=True)
    send({"done": base64.b64encode(done.ipc_handle()).decode()})
    while True:
        m = recv()
        if m["op"] == "exit": break
        s = torch.cuda.current_stream(); s.wait_event(gate)
        if m["work"]: buf.zero_()
        done.record(s); send({"op": "enqueued"})
else:
    from harness.worker.shared_memory import Buffer  # (in the sandbox: the worker side only)
    m = recv()
    lib = ctypes.CDLL("libcuda.so.1")
    wait = getattr(lib, "cuStreamWaitValue32_v2"); write = getattr(lib, "cuStreamWriteValue32_v2")
    for fn in (wait, write):
        fn.restype = ctypes.c_int; fn.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
    send({"op": "ready-fd"})
    fds = socket.recv_fds(sock, 1, 1)[1]
    flags = Buffer(m["nbytes"], "cuda", fds[0]); flags.close_fd()
    base = flags.bytes_tensor().data_ptr()
    send({"op": "mapped"})
    while True:
        m = recv()
        if m["op"] == "exit": break
        s = torch.cuda.current_stream()
        rc1 = wait(ctypes.c_void_p(s.cuda_stream), base, m["seq"], 0)
        if m["work"]: buf.zero_()
        rc2 = write(ctypes.c_void_p(s.cuda_stream), base + 4, m["seq"], 0)
        send({"op": "enqueued", "rc": [rc1, rc2]})
"""


def _memops():
    import ctypes
    lib = ctypes.CDLL("libcuda.so.1")
    wait, write = lib.cuStreamWaitValue32_v2, lib.cuStreamWriteValue32_v2
    for fn in (wait, write):
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
    return wait, write


def part_b() -> None:
    """Stream memory operations inside one process (no sandbox)."""
    import ctypes
    import torch
    wait, write = _memops()
    flags = torch.zeros(4, dtype=torch.int32, device="cuda")
    a, b = torch.cuda.Stream(), torch.cuda.Stream()
    out = []
    for seq in range(1, 21):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record(a)
        rc1 = wait(ctypes.c_void_p(a.cuda_stream), flags.data_ptr(), seq, 0)
        e1.record(a)
        rc2 = write(ctypes.c_void_p(b.cuda_stream), flags.data_ptr(), seq, 0)
        e1.synchronize()
        out.append(e0.elapsed_time(e1) * 1e3)
    print(f"B memops in-process: rc {rc1},{rc2}  wait->release med {statistics.median(out):.1f} us", flush=True)


def part_sandbox(mode: str) -> None:
    import ctypes
    import torch
    from harness.api import bwrap_command, child_env, find_bwrap
    torch.zeros(1, device="cuda")
    parent, child = socket.socketpair()
    script = Path("/tmp/fence_worker.py")
    script.write_text(WORKER)
    box = bwrap_command(find_bwrap(), script, []) if os.environ.get("NO_SANDBOX") != "1" else []
    pipe = os.environ.get("CUDA_MPS_PIPE_DIRECTORY")
    if box and pipe:  # an MPS client inside the sandbox: the daemon's pipes and its shared memory
        fds = box.fds
        shm = [] if os.environ.get("NO_SHM") == "1" else ["--bind", "/dev/shm", "/dev/shm"]
        box = type(box)(list(box[:-1]) + ["--bind", pipe, pipe, *shm,
                                          "--setenv", "CUDA_MPS_PIPE_DIRECTORY", pipe, "--"])
        box.fds = fds
    cmd = list(box) + [sys.executable, str(script), str(child.fileno()), str(ROOT)]
    proc = subprocess.Popen(cmd, pass_fds=[child.fileno(), *getattr(box, "fds", ())], env=child_env())
    child.close()
    f = parent.makefile("rw")

    def send(m):
        f.write(json.dumps(m) + "\n"); f.flush()

    def recv():
        return json.loads(f.readline())

    stream = torch.cuda.Stream()
    torch.cuda.set_stream(stream)
    buf = torch.empty(120 << 20, dtype=torch.uint8, device="cuda")
    send({"mode": mode})
    if mode == "events":
        gate = torch.cuda.Event(interprocess=True)
        send({"gate": base64.b64encode(gate.ipc_handle()).decode()})
        done = torch.cuda.Event.from_ipc_handle(0, base64.b64decode(recv()["done"]))
    else:
        from harness.api import Buffer
        wait, write = _memops()
        flags = Buffer(4096, "cuda")
        send({"nbytes": flags.nbytes})
        assert recv()["op"] == "ready-fd"
        socket.send_fds(parent, [b"x"], [flags.fd])
        flags.close_fd()
        base = flags.bytes_tensor().data_ptr()
        assert recv()["op"] == "mapped"
    for work in (False, True):
        rows = []
        for seq in range(1, 41):
            torch.cuda.synchronize()
            e_mid, e_end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            for _ in range(4):
                buf.zero_()
            e_mid.record()
            if mode == "events":
                gate.record()
            else:
                write(ctypes.c_void_p(stream.cuda_stream), base, seq + (100 if work else 0), 0)
            send({"op": "call", "work": work, "seq": seq + (100 if work else 0)})
            reply = recv()
            if mode == "events":
                stream.wait_event(done)
            else:
                wait(ctypes.c_void_p(stream.cuda_stream), base + 4, seq + (100 if work else 0), 0)
            e_end.record()
            e_end.synchronize()
            rows.append(e_mid.elapsed_time(e_end) * 1e3)
        rows = sorted(rows[5:])
        print(f"{'A' if mode == 'events' else 'C'} {mode} sandbox={os.environ.get('NO_SANDBOX') != '1'} "
              f"host-shm={os.environ.get('NO_SHM') != '1'} work={work}: "
              f"med {statistics.median(rows):.1f} p10 {rows[3]:.1f} p90 {rows[-4]:.1f} us  {reply}", flush=True)
    send({"op": "exit"})
    proc.wait(10)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        part = sys.argv[1]
        if part == "B":
            part_b()
        else:
            part_sandbox(part)
        sys.exit(0)
    parts = os.environ.get("PARTS", "B,events,memops,events:nosandbox").split(",")
    flags = {"nosandbox": {"NO_SANDBOX": "1"}, "noshm": {"NO_SHM": "1"}}
    for part, env in ((p.split(":")[0], flags.get(p.split(":")[-1], {})) for p in parts):
        try:
            r = subprocess.run([sys.executable, __file__, part], timeout=40, env={**os.environ, **env},
                               capture_output=True, text=True)
            print(r.stdout.strip() or f"{part}: no output", "\n", r.stderr.strip()[-600:], flush=True)
        except subprocess.TimeoutExpired as exc:
            print(f"{part} {env}: HUNG (40 s); {str(exc.stdout)[-300:]}", flush=True)
