"""Probe: the parent's own CUDA events around a call made in another process, fenced by stream
memory operations (cuStreamWaitValue32 / cuStreamWriteValue32) under MPS.

Parent stream: refill KV, flush L2 (write + read pass), HOLD (wait until the worker has enqueued its
call), E_mid, write q, GATE := seq, wait DONE >= seq, E_f, snapshot the output slot, E_end.
Worker stream: wait GATE >= seq, the call, copy the output into the slot, DONE := seq.
Printed beside a null call (the parent plays the worker), a null worker, the worker's own events
(launches hidden behind busy work) and a CUPTI trace taken in the worker.
Usage (GPU machine, MPS daemon running): FILES=triton_bf16,triton_mxfp4 python lab/fence_probe.py
"""

from __future__ import annotations

import ctypes
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.multiprocessing as mp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
GEQ = 0x0


class MemOps:
    def __init__(self):
        lib = ctypes.CDLL("libcuda.so.1")
        self.wait = getattr(lib, "cuStreamWaitValue32_v2", None) or lib.cuStreamWaitValue32
        self.write = getattr(lib, "cuStreamWriteValue32_v2", None) or lib.cuStreamWriteValue32
        for f in (self.wait, self.write):
            f.restype = ctypes.c_int
            f.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]

    def wait_geq(self, stream, ptr, value):
        rc = self.wait(ctypes.c_void_p(stream.cuda_stream), ptr, value, GEQ)
        assert rc == 0, f"cuStreamWaitValue32: {rc}"

    def put(self, stream, ptr, value):
        rc = self.write(ctypes.c_void_p(stream.cuda_stream), ptr, value, 0)
        assert rc == 0, f"cuStreamWriteValue32: {rc}"


def put(dst, src):
    torch.mul(src, 1, out=dst)


def worker(conn, path):
    sys.path.insert(0, str(ROOT))
    torch.cuda.init()
    ops = MemOps()
    from harness.api import load_module
    kernel = load_module(path).custom_kernel if path else None
    conn.send("up")
    data = slot = flags = None
    while True:
        msg = conn.recv()
        op = msg[0]
        if op == "exit":
            return
        if op == "inputs":
            data, slot, flags = msg[1], msg[2], msg[3]
            conn.send("ok")
        elif op == "call":
            seq = msg[1]
            t0 = time.perf_counter()
            stream = torch.cuda.current_stream()
            ops.wait_geq(stream, flags.data_ptr(), seq)
            if kernel:
                put(slot, kernel(data))
            ops.put(stream, flags.data_ptr() + 4, seq)
            conn.send(("enqueued", time.perf_counter() - t0))
        elif op == "cupti":
            from torch.profiler import ProfilerActivity, profile
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(msg[1]):
                    torch.cuda.synchronize()
                    put(slot, kernel(data))
                    torch.cuda.synchronize()
            ev = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
            conn.send(sum(e.device_time for e in ev) / msg[1])
        elif op == "own_events":  # the worker's own events with launches hidden (today's timer)
            buf = torch.empty(120 << 20, dtype=torch.uint8, device="cuda")
            times = []
            for _ in range(msg[1]):
                for _ in range(20):
                    buf.zero_()
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record(); put(slot, kernel(data)); e.record(); e.synchronize()
                times.append(s.elapsed_time(e) * 1e3)
            conn.send(statistics.median(times))


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main() -> None:
    import faulthandler
    faulthandler.dump_traceback_later(float(os.environ.get("HANG_S", "100")), exit=True)
    import reference
    ops = MemOps()
    ctx = mp.get_context("spawn")
    flush = torch.empty(120 << 20, dtype=torch.uint8, device="cuda")
    words = flush.view(torch.float32)
    sink = torch.zeros((), device="cuda")
    side = torch.cuda.Stream()
    play = torch.cuda.Stream()  # the parent playing the worker (null call in one process)
    main_stream = torch.cuda.Stream()
    torch.cuda.set_stream(main_stream)
    print("stream mem ops attribute:", torch.cuda.get_device_properties(0).name, flush=True)
    lines = []
    shapes = tuple(tuple(int(n) for n in s.split("x")) for s in os.environ.get("SHAPES", "4x1024,32x1024,32x8192,64x8192,256x8192").split(","))
    files = os.environ.get("FILES", "triton_bf16").split(",")
    for path in ["self", None] + [str(ROOT / f"submissions/{f}.py") for f in files]:
        p = None
        if path != "self":
            parent_end, child_end = ctx.Pipe()
            p = ctx.Process(target=worker, args=(child_end, path), daemon=True)
            p.start()
            assert parent_end.recv() == "up"
        name = "parent-null" if path == "self" else Path(path).stem if path else "worker-null"
        for b, l in shapes:
            data = reference.generate_input(batchsize=b, qseqlen=1, kvseqlen=l, seed=7)
            fresh = reference.generate_input(batchsize=b, qseqlen=1, kvseqlen=l, seed=8)
            shape, dtype = reference.output_layout(data)
            slot = torch.zeros(shape, dtype=dtype, device="cuda")
            snap = torch.empty_like(slot)
            flags = torch.zeros(4, dtype=torch.int32, device="cuda")  # gate, done, hold
            base = flags.data_ptr()
            if p:
                parent_end.send(("inputs", data, slot, flags))
                assert parent_end.recv() == "ok"
            q, fresh_q = data[0], fresh[0]
            kv, fresh_kv = data[1]["bf16"], fresh[1]["bf16"]
            rows = []
            stream = main_stream
            for seq in range(1, int(os.environ.get("CALLS", "60")) + 1):
                torch.cuda.synchronize()
                e0, e_mid, e_f, e_end = (torch.cuda.Event(enable_timing=True) for _ in range(4))
                e0.record()
                kv.copy_(fresh_kv)
                flush.zero_(); torch.sum(words, 0, out=sink)
                ops.wait_geq(stream, base + 8, seq)
                e_mid.record()
                put(q, fresh_q)
                ops.put(stream, base, seq)
                ops.wait_geq(stream, base + 4, seq)
                e_f.record()
                put(snap, slot)
                e_end.record()
                t0 = time.perf_counter()
                if p:
                    parent_end.send(("call", seq))
                    _, host_s = parent_end.recv()
                else:
                    ops.wait_geq(play, base, seq)
                    ops.put(play, base + 4, seq)
                round_trip = time.perf_counter() - t0
                ops.put(side, base + 8, seq)  # release HOLD
                e_end.synchronize()
                rows.append((e_mid.elapsed_time(e_end) * 1e3, e0.elapsed_time(e_mid) * 1e3, round_trip * 1e6))
            rows = rows[10:]
            fen = [r[0] for r in rows]
            extra = ""
            if p and path:
                parent_end.send(("own_events", 20))
                own = parent_end.recv()
                parent_end.send(("cupti", 5))
                cupti = parent_end.recv()
                extra = f"  own_events {own:7.1f}  cupti(call+copy) {cupti:7.1f}"
            line = (f"{name:12s} {b:3d}x{l:<5d} fenced med {statistics.median(fen):7.1f} p10 {pct(fen, .1):7.1f} "
                    f"p90 {pct(fen, .9):7.1f} min {min(fen):7.1f}{extra}  round_trip {statistics.median(r[2] for r in rows):6.1f}")
            print(line, flush=True)
            lines.append(line)
        if p:
            parent_end.send(("exit",))
            p.join()
    print("\n==== summary ====")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
