"""The cross-compile report's targets: a target's name parsed (`parse_target`), what it allows
(AMD_LIMITS, NVIDIA_SHARED_BYTES), the report's named messages for the usual traps, the GPU a run on
it sees (TARGET_DEVICES) and how a target process makes torch describe that GPU (`install_device`,
`on_device`). Imports only the standard library (torch inside the functions that use it)."""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Optional

DEFAULT_TARGETS = ("gfx950", "gfx942")


# ---------------------------------------------------------------------------------------------
# What a target allows.
# ---------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class AmdLimits:
    """Per compute unit: SIMDS_PER_CU SIMDs sharing `lds_bytes` of LDS (also the most one workgroup
    may use); per SIMD: a register file of `vgpr_file` VGPRs per lane, shared by a wave's
    architectural VGPRs and AGPRs and allocated in blocks of `vgpr_granule`, `sgpr_file` SGPRs, and
    at most `max_waves` waves."""

    lds_bytes: int
    vgpr_file: int = 512
    vgpr_granule: int = 8
    sgpr_file: int = 800
    max_waves: int = 8


SIMDS_PER_CU = 4
# CDNA3 (gfx942, MI300X) and CDNA4 (gfx950, MI355X). Sources: the LDS sizes are the ones Triton's AMD
# backend allocates shared memory against (its target info: 160 KiB on CDNA4, 64 KiB before it); the
# register file (512 VGPRs per lane, architectural and AGPRs together, in blocks of 8), the 800 SGPRs
# and the 8-wave cap are LLVM AMDGPU's figures for gfx90a and later, the ones behind the
# "; Occupancy:" line LLVM writes into every kernel's assembly. `amd_occupancy` reproduces that line
# (tests/test_crosscompile.py compares the two) and adds the LDS limit, which LLVM cannot see: Triton
# sizes a kernel's LDS at launch.
AMD_LIMITS = {"gfx942": AmdLimits(lds_bytes=64 << 10), "gfx950": AmdLimits(lds_bytes=160 << 10)}
# Shared memory one thread block may use (opt-in maximum): 227 KiB on compute capability 9.0 and
# 10.0 (the CUDA C++ Programming Guide's table of technical specifications).
NVIDIA_SHARED_BYTES = {90: 227 << 10, 100: 227 << 10}

# Named messages for the usual traps (tests/amd_style/ holds competition-style files that trigger the
# fp8 and launch-option ones; tests/test_crosscompile.py checks each message where it is due).
FP8_OCP_ON_GFX942 = ("float8_e4m3fn on gfx942: MI300 computes in e4m3fnuz (max 240), the type the harness passes "
                     "there (harness/device.py); OCP e4m3 is converted in software and tl.dot on it falls back to "
                     "fp16 MFMA")
FNUZ_ON_GFX950 = ("float8_e4m3fnuz on gfx950: MI355X's fp8 is OCP e4m3fn; fnuz is converted in software and "
                  "tl.dot on it falls back to fp16 MFMA")
AMD_OPTIONS_ON_NVIDIA = ("{names}: AMD-only launch option(s): Triton on NVIDIA rejects the launch (KeyError: "
                         "unrecognised keyword); pass them only when torch.version.hip")
NVIDIA_OPTIONS_ON_AMD = ("{names}: NVIDIA-only launch option(s): Triton on AMD rejects the launch (KeyError: "
                         "unrecognised keyword); pass them only on CUDA")
KPACK_ON_GFX950 = "kpack={value} is ignored on gfx950 (Triton resets it to 1 and warns)"
LDS_BEYOND_TARGET = ("needs {need:.1f} KiB of {what}; {target} has {have:.0f} KiB per workgroup: the launch fails "
                     "(out of resource: shared memory)")
SPILLS = "spills to scratch memory: {bytes} B per lane ({vgprs} VGPRs, {sgprs} SGPRs spilled)"
SPILLS_IN_REGISTERS = ("spills {vgprs} VGPRs and {sgprs} SGPRs into other registers (AGPRs, VGPR lanes), "
                       "no scratch memory")
NVIDIA_LOCAL = "{bytes} B of local memory per thread (spilled registers, or local arrays)"
NO_MATRIX = "no matrix instructions: vector math fallback"
XF32_MFMA = ("fp32 tl.dot runs as xf32 MFMA here (TF32-class inputs, Triton's default where the target has it); "
             "input_precision='ieee' keeps full fp32")
NEED_PTXAS = "NVIDIA targets need the ptxas Triton's wheel ships (or TRITON_PTXAS_PATH / TRITON_PTXAS_BLACKWELL_PATH)"
WAVES_NOT_MET = "waves_per_eu={asked} asked for, the registers allow {got}"


def parse_target(name: str) -> tuple[str, Any, int]:
    """("hip", "gfx950", 64) for "gfx950", ("cuda", 90, 32) for "sm_90": the GPUTarget fields;
    ValueError for anything else."""
    if re.fullmatch(r"gfx[0-9]{2,4}[a-z]?", name):
        return "hip", name, 64 if int(name[3:-2] or 0) < 10 else 32
    match = re.fullmatch(r"sm_?([0-9]{2,3})a?", name)
    if match:
        return "cuda", int(match.group(1)), 32
    raise ValueError(f"unknown target {name!r}: use an AMD architecture (gfx950, gfx942) "
                     "or an NVIDIA one (sm_90, sm_100)")


# ---------------------------------------------------------------------------------------------
# The GPU a target process pretends to have.
# ---------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class TargetDevice:
    """One GPU of a target as PyTorch describes it there (torch.cuda.* is also ROCm's API):
    get_device_name / get_device_properties().name, get_device_capability() (ROCm reports the
    architecture's major and minor: (9, 5) for gfx950), multi_processor_count (CUs on AMD, SMs on
    NVIDIA), total_memory, and on ROCm gcnArchName (the architecture with its feature flags)."""

    name: str
    vendor: str                   # "hip" or "cuda", as parse_target says
    capability: tuple[int, int]
    units: int
    memory_gb: int
    gcn_arch: str = ""

    def describe(self) -> str:
        if self.vendor == "hip":
            return f"{self.name} (ROCm, {self.gcn_arch.split(':')[0]}, {self.units} CUs)"
        return f"{self.name} (CUDA, compute capability {self.capability[0]}.{self.capability[1]}, {self.units} SMs)"


# The devices a run on each target would see: MI355X (256 CUs, 288 GB) and MI300X (304 CUs, 192 GB),
# AMD's Instinct specifications; H200 (132 SMs, 141 GB; the H100 SXM's SM count) and B200 (148 SMs),
# NVIDIA's. Keyed by parse_target's architecture (sm_NN for NVIDIA).
TARGET_DEVICES = {
    "gfx950": TargetDevice("AMD Instinct MI355X", "hip", (9, 5), 256, 288, "gfx950:sramecc+:xnack-"),
    "gfx942": TargetDevice("AMD Instinct MI300X", "hip", (9, 4), 304, 192, "gfx942:sramecc+:xnack-"),
    "sm_90": TargetDevice("NVIDIA H200", "cuda", (9, 0), 132, 141),
    "sm_100": TargetDevice("NVIDIA B200", "cuda", (10, 0), 148, 180),
}
ROCM_VERSION, CUDA_VERSION = "6.4", "12.8"   # what torch.version.hip / .cuda say in a target process
PLANNED_ON_TARGET = "launches planned as on {device}"
PLANNED_ON_CPU = "launches captured on the CPU in Triton's interpreter (its CPU variant, not {device}'s): {why}"
NO_DEVICE = "no GPU known for {target} (TARGET_DEVICES: {known})"


def target_device(target: str) -> Optional[TargetDevice]:
    """The GPU a run on `target` sees, or None for a target TARGET_DEVICES does not list."""
    vendor, arch, _ = parse_target(target)
    return TARGET_DEVICES.get(arch if vendor == "hip" else f"sm_{arch}")


def install_device(device: TargetDevice) -> None:
    """Make this process's torch describe `device` as its one GPU, as torch does on a machine with
    it: torch.version.hip (ROCm) or .cuda, torch.cuda.is_available / device_count / current_device /
    get_device_name / get_device_properties / get_device_capability; set_device and synchronize do
    nothing. Anything else of a GPU runtime (streams, events, the memory allocator) still raises."""
    import types

    import torch

    fields = dict(name=device.name, major=device.capability[0], minor=device.capability[1],
                  multi_processor_count=device.units, total_memory=device.memory_gb * 10**9,
                  warp_size=64 if device.vendor == "hip" else 32, is_integrated=False, is_multi_gpu_board=False)
    if device.vendor == "hip":
        fields["gcnArchName"] = device.gcn_arch
    props = types.SimpleNamespace(**fields)
    torch.version.hip = ROCM_VERSION if device.vendor == "hip" else None
    torch.version.cuda = CUDA_VERSION if device.vendor == "cuda" else None
    cuda = torch.cuda
    cuda.is_available = lambda: True
    cuda.device_count = lambda: 1
    cuda.current_device = lambda: 0
    cuda.get_device_name = lambda device=None: props.name
    cuda.get_device_properties = lambda device=None: props
    cuda.get_device_capability = lambda device=None: (props.major, props.minor)
    cuda.set_device = lambda device: None
    cuda.synchronize = lambda device=None: None


def on_device(data: Any) -> Any:
    """`data` (the task's inputs, made on the CPU) with every tensor as a FakeTensor on "cuda", to be
    used inside the FakeTensorMode that is active: the same dtype, shape, strides and storage offset,
    and tensors that shared a storage share one; no values (reading one raises)."""
    import torch
    from torch.utils._pytree import tree_map

    storages: dict[int, Any] = {}

    def convert(value: Any) -> Any:
        if not isinstance(value, torch.Tensor):
            return value
        storage = value.untyped_storage()
        base = storages.get(storage.data_ptr())
        if base is None:
            base = storages[storage.data_ptr()] = torch.empty(storage.nbytes(), dtype=torch.uint8, device="cuda")
        return torch.empty(0, dtype=value.dtype, device="cuda").set_(
            base.untyped_storage(), value.storage_offset(), value.size(), value.stride())

    return tree_map(convert, data)
