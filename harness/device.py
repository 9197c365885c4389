"""Which device we run on, and the few vendor differences the harness cares about.

`torch.cuda.*` is also PyTorch's ROCm API, so one code path serves NVIDIA and AMD; where they
differ (fp8 flavour, arch names) the choice is made here from plain data, so it can be tested
on a CPU by passing a made-up `DeviceInfo`.
"""

from __future__ import annotations

import dataclasses
import platform
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


@dataclasses.dataclass(frozen=True)
class DeviceInfo:
    type: str      # torch device type: "cuda" (NVIDIA or ROCm) or "cpu"
    vendor: str    # "nvidia", "amd" or "cpu"
    name: str      # e.g. "NVIDIA H200", "AMD Instinct MI355X"
    arch: str      # e.g. "sm_90", "gfx950", "x86_64"
    l2_bytes: int  # last-level cache to flush between timed calls (0 on CPU)
    count: int = 1

    @property
    def torch_device(self) -> torch.device:
        import torch

        return torch.device(self.type)

    @property
    def is_gpu(self) -> bool:
        return self.type == "cuda"

    def describe(self) -> str:
        return f"{self.name} ({self.vendor}, {self.arch})"


class DeviceError(RuntimeError):
    pass


def device_type(requested: str | None = None) -> str:
    """"cpu" or "cuda" (NVIDIA or ROCm), without initialising a GPU context."""
    import torch

    if requested not in (None, "cpu", "cuda"):
        raise DeviceError(f"--device must be cpu or cuda, got {requested!r}")
    if requested == "cpu" or (requested is None and not torch.cuda.is_available()):
        return "cpu"
    if not torch.cuda.is_available():
        raise DeviceError("--device cuda: no GPU is visible to PyTorch (torch.cuda.is_available() is False)")
    return "cuda"


def flush_bytes(l2_bytes: int) -> int:
    """The size of a buffer that leaves none of a call's data in an L2 cache of `l2_bytes` once it is
    written and then read (the fence; the worker's timer, which
    imports nothing of the parent's, sizes its own the same way): twice the cache, at least 1 MiB,
    in whole float32 words."""
    return max(2 * l2_bytes, 1 << 20) // 4 * 4


def gpu_l2_bytes() -> int:
    """The first visible GPU's L2 (last-level) cache size; unknown: assume a large one."""
    import torch

    return int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or 0) or 256 * 2**20


def detect(requested: str | None = None) -> DeviceInfo:
    """The device to evaluate on: `requested` ("cpu" or "cuda") or the first GPU if there is one."""
    import torch

    if device_type(requested) == "cpu":
        return DeviceInfo("cpu", "cpu", platform.processor() or platform.machine() or "cpu",
                          platform.machine() or "cpu", 0, 1)
    props = torch.cuda.get_device_properties(0)
    if torch.version.hip:
        vendor = "amd"
        arch = str(getattr(props, "gcnArchName", "gfx")).split(":")[0]
    else:
        vendor = "nvidia"
        arch = f"sm_{props.major}{props.minor}"
    return DeviceInfo("cuda", vendor, props.name, arch, gpu_l2_bytes(), torch.cuda.device_count())


def fp8_dtype(info: DeviceInfo) -> torch.dtype:
    """e4m3 as the hardware does it: MI300 (gfx942) uses the `fnuz` variant, NVIDIA, MI355X
    (gfx950) and the CPU use OCP `e4m3fn`."""
    import torch

    if info.vendor == "amd" and info.arch.startswith("gfx94"):
        return torch.float8_e4m3fnuz
    return torch.float8_e4m3fn


def versions() -> dict[str, str]:
    """Software versions worth recording with every result."""
    import torch

    out = {"torch": torch.__version__, "python": platform.python_version()}
    try:
        import triton

        out["triton"] = triton.__version__
    except Exception:  # triton is optional on CPU
        out["triton"] = "-"
    out["gpu_runtime"] = (f"hip {torch.version.hip}" if torch.version.hip
                          else f"cuda {torch.version.cuda}" if torch.version.cuda else "-")
    return out


def measure_copy_bandwidth(size_bytes: int = 1 << 30, repeats: int = 10, rounds: int = 5,
                           warmup_s: float = 0.2) -> float:
    """Device-to-device copy bandwidth in bytes/s, counting bytes read plus bytes written
    (the number the floors and roofline percentages are relative to). It copies for `warmup_s`
    first, then keeps the best of `rounds` timed rounds: other work on the GPU (a worker starting
    beside it) can slow one round."""
    import torch

    src = torch.empty(size_bytes, dtype=torch.uint8, device="cuda").fill_(1)
    dst = torch.empty_like(src)
    end_warmup = time.perf_counter() + warmup_s
    while time.perf_counter() < end_warmup:
        for _ in range(10):
            dst.copy_(src)
        torch.cuda.synchronize()
    best = 0.0
    for _ in range(rounds):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        for _ in range(repeats):
            dst.copy_(src)
        end.record()
        end.synchronize()
        best = max(best, 2 * size_bytes * repeats / (begin.elapsed_time(end) / 1e3))
    del src, dst
    torch.cuda.empty_cache()
    return best


def release_cached(info: DeviceInfo) -> None:
    """Hand the memory PyTorch's allocator keeps cached back to the GPU (the parent runs every case
    of every file in one process: a large case's leftovers would crowd out the next worker)."""
    import torch

    if info.is_gpu:
        torch.cuda.empty_cache()


def synchronize(info: DeviceInfo) -> None:
    import torch

    if info.is_gpu:
        torch.cuda.synchronize()


# What a file's failure says when the harness's own GPU context did not survive it.
CONTEXT_LOST = ("the harness's GPU context was lost while this file ran (a GPU fault in a worker under MPS "
                "reaches every client of the GPU)")


def context_ok(info: DeviceInfo) -> bool:
    """Whether this process's GPU context still works (under MPS a fatal fault in any client, a
    worker's included, ends every client's context)."""
    if not info.is_gpu:
        return True
    try:
        synchronize(info)
    except RuntimeError:
        return False
    return True
