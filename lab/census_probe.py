"""Does the census (harness/parent/census.py) see a kernel that holds an SM, and what does it cost?

On an NVIDIA GPU (one process; the harness's own runs check the cross-process case): launches a
"holder" kernel on another stream, one block of the given shared memory that spins for a while, then
the census; prints how many census blocks missed. Then the census alone, timed with events, and the
census behind the L2 flush as the fence runs it. Usage: python3 lab/census_probe.py
"""

from __future__ import annotations

import ctypes
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from harness.api import Census  # noqa: E402
from harness.api import driver_call  # noqa: E402

_HOLDER = rb"""
.version 7.0
.target sm_70
.address_size 64
.extern .shared .align 16 .b8 holder_smem[];
.visible .entry holder(.param .u64 spin_ns)
{
    .reg .pred %p<2>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [spin_ns];
    mov.u64 %rd2, %globaltimer;
SPIN:
    mov.u64 %rd3, %globaltimer;
    sub.u64 %rd4, %rd3, %rd2;
    setp.lt.u64 %p1, %rd4, %rd1;
    @%p1 bra SPIN;
    ret;
}
"""


def holder():
    module, function = ctypes.c_void_p(), ctypes.c_void_p()
    driver_call("ModuleLoadData", ctypes.byref(module), ctypes.c_char_p(_HOLDER))
    driver_call("ModuleGetFunction", ctypes.byref(function), module, b"holder")
    driver_call("FuncSetAttribute", function, 8, 200 * 1024)
    return module, function


def hold(function, stream, blocks: int, smem: int, spin_s: float) -> None:
    spin = ctypes.c_uint64(int(spin_s * 1e9))
    params = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.byref(spin), ctypes.c_void_p))
    driver_call("LaunchKernel", function, blocks, 1, 1, 32, 1, 1, smem, ctypes.c_void_p(stream.cuda_stream), params, None)


def main() -> None:
    census = Census()
    print(f"device {torch.cuda.get_device_name()}: {census.sms} SMs, census block {census.smem} bytes of shared memory")
    _, function = holder()
    other, own = torch.cuda.Stream(), torch.cuda.Stream()
    hold(function, other, 1, 0, 1e-6)  # both kernels launched once before anything is measured
    with torch.cuda.stream(own):
        census.launch(own)
    torch.cuda.synchronize()
    rows = []
    for blocks, smem, spin_s in ((1, 0, 0.005), (1, 1024, 0.005), (1, 48 * 1024, 0.005), (8, 0, 0.005),
                                 (132, 0, 0.005), (1, 0, 50e-6), (1, 0, 0.005)):
        torch.cuda.synchronize()
        census.missed()
        hold(function, other, blocks, smem, spin_s)
        with torch.cuda.stream(own):
            torch.cuda._sleep(20_000)  # ~10 µs: the holder is resident first
            census.launch(own)
        torch.cuda.synchronize()
        rows.append((f"holder {blocks} block(s), {smem // 1024} KiB smem, spins {spin_s * 1e6:.0f} µs", census.missed()))
    torch.cuda.synchronize()
    census.missed()
    times = []
    for _ in range(50):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(own):
            start.record()
            census.launch(own)
            end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    rows.append(("census alone, idle GPU: missed", census.missed()))
    flush = torch.zeros(2 * 60 * 2**20 // 4, dtype=torch.float32, device="cuda")
    sink = torch.zeros((), device="cuda")
    behind = []
    for _ in range(50):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(own):
            flush.zero_()
            torch.sum(flush, 0, out=sink)
            start.record()
            census.launch(own)
            end.record()
        end.synchronize()
        behind.append(start.elapsed_time(end) * 1e3)
    for what, value in rows:
        print(f"{what:<60} census blocks missed: {value}")
    for what, ts in (("census alone", times), ("census after the flush", behind)):
        ts = sorted(ts[5:])
        print(f"{what:<60} µs: min {ts[0]:.2f}  median {statistics.median(ts):.2f}  p90 {ts[int(0.9 * len(ts))]:.2f}")


if __name__ == "__main__":
    main()
