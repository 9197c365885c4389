"""The compiler's numbers, pure functions of its output: register counts, spills and scratch from
the AMD backend's kernel metadata (`parse_amdgcn`), the waves per SIMD they and the LDS allow
(`amd_occupancy`), the matrix instructions in the assembly or PTX, cuobjdump's resource usage on
NVIDIA, the fp8 traps of a kernel's types, and a compiler failure as one line."""

from __future__ import annotations

import re
from typing import Iterable, Optional

from harness.compile.targets import AMD_LIMITS, FNUZ_ON_GFX950, FP8_OCP_ON_GFX942, SIMDS_PER_CU


_AMD_FIELDS = {"vgpr": r"\.vgpr_count:\s*(\d+)", "agpr": r"\.agpr_count:\s*(\d+)", "sgpr": r"\.sgpr_count:\s*(\d+)",
               "spill_vgpr": r"\.vgpr_spill_count:\s*(\d+)", "spill_sgpr": r"\.sgpr_spill_count:\s*(\d+)",
               "scratch_bytes": r"\.private_segment_fixed_size:\s*(\d+)",
               "compiler_occupancy": r";\s*Occupancy:\s*(\d+)"}


def parse_amdgcn(asm: str) -> dict[str, Optional[int]]:
    """Register counts, spills and scratch from the kernel metadata the AMD backend writes into the
    assembly (`.vgpr_count` counts architectural VGPRs and AGPRs together, as they are allocated),
    and LLVM's own occupancy line."""
    found = {}
    for key, pattern in _AMD_FIELDS.items():
        match = re.search(pattern, asm)
        found[key] = int(match.group(1)) if match else None
    return found


def amd_occupancy(arch: str, vgprs: int, sgprs: int, lds_bytes: int, num_warps: int) -> tuple[Optional[int], str]:
    """Waves per SIMD the registers and LDS of one kernel allow on `arch`, and what limits it first
    ("max" when nothing does: the hardware's cap); (None, "") for an architecture without limits here."""
    limits = AMD_LIMITS.get(arch)
    if limits is None:
        return None, ""
    blocks = -(-max(vgprs, 1) // limits.vgpr_granule) * limits.vgpr_granule
    allowed = {"max": limits.max_waves, "VGPR": limits.vgpr_file // blocks, "SGPR": limits.sgpr_file // max(sgprs, 1)}
    if lds_bytes:
        groups = limits.lds_bytes // lds_bytes
        allowed["LDS"] = 0 if groups == 0 else max(1, groups * num_warps // SIMDS_PER_CU)
    limiter = min(allowed, key=allowed.get)
    return allowed[limiter], limiter


_AMD_MATRIX = re.compile(r"\b(v_mfma\w*|v_smfmac\w*|v_wmma\w*|v_swmmac\w*)")
_NVIDIA_MATRIX = re.compile(r"\b((?:mma\.sync|wgmma\.mma_async|tcgen05\.mma)[\w.:]*)")
_PTX_NOISE = {"sync", "aligned", "row", "col"}  # qualifiers every matrix instruction of its kind carries


def matrix_instructions(asm: str, vendor: str) -> list[str]:
    """The distinct matrix instructions in a kernel's assembly (amdgcn) or PTX, sorted (PTX ones
    without the qualifiers they all carry: mma.m16n8k8.f32.tf32.tf32.f32)."""
    if vendor == "hip":
        return sorted(set(_AMD_MATRIX.findall(asm)))
    return sorted({".".join(p for p in name.split(".") if p not in _PTX_NOISE) for name in _NVIDIA_MATRIX.findall(asm)})


def uses_dot(ttir: str) -> bool:
    """Whether the kernel asks for a matrix product (tl.dot / tl.dot_scaled) at all."""
    return bool(re.search(r"\btt\.dot(_scaled)?\b", ttir))


def parse_resource_usage(text: str) -> dict[str, int]:
    """REG / STACK / SHARED / LOCAL of the first function in `cuobjdump --dump-resource-usage` output."""
    return {key: int(value) for key, value in re.findall(r"\b(REG|STACK|SHARED|LOCAL):(\d+)", text)[:4]}


def nvidia_local_bytes(usage: dict[str, int]) -> Optional[int]:
    """Local memory per thread of an NVIDIA kernel: ptxas puts spilled registers in the stack frame
    (STACK), local memory as much as LOCAL is; the driver's local size (Triton's n_spills * 4 on a
    GPU) counts both: the H200's spill counts in BENCHMARKS.md are these numbers / 4."""
    return (usage.get("STACK") or 0) + (usage.get("LOCAL") or 0) if usage else None


def fp8_traps(arch: str, types: Iterable[str], ttir: str = "") -> list[str]:
    """The fp8 messages for `arch`, from the kernel's argument types (torch's names, or Triton's:
    fp8e4nv is OCP e4m3, fp8e4b8 MI300's fnuz) and, once compiled, its TTIR (fp8 made inside the kernel)."""
    types = " ".join(types)
    ocp = re.search(r"\b(fp8e4nv|float8_e4m3fn)\b", types) or re.search(r"\bf8E4M3FN\b", ttir)
    fnuz = re.search(r"\b(fp8e4b8|float8_e4m3fnuz)\b", types) or re.search(r"\bf8E4M3FNUZ\b", ttir)
    notes = []
    if arch == "gfx942" and ocp:
        notes.append(FP8_OCP_ON_GFX942)
    if arch == "gfx950" and fnuz:
        notes.append(FNUZ_ON_GFX950)
    return notes


def compile_error_line(exc: BaseException, first_line: Optional[int] = None) -> str:
    """A compiler failure as one line: for Triton's CompilationError the kernel's source line and
    the message (not the source excerpt), else the exception's type and first lines of message."""
    from harness.worker.channel import one_line

    node = getattr(exc, "node", None)
    if hasattr(exc, "src") and node is not None:  # a CompilationError (its message holds a source excerpt)
        message, cause = exc.error_message, exc.__cause__
        while message is None and cause is not None:  # the reason sits in the exception it wraps
            if not hasattr(cause, "error_message"):
                message = one_line(cause)
                break
            message, cause = cause.error_message, cause.__cause__
        where = getattr(node, "lineno", None)
        if where is not None and first_line is not None:
            where = f"line {first_line + where - 1}"
        elif where is not None:
            where = f"kernel line {where}"
        text = " ".join((message or type(exc).__name__).split())
        return f"{type(exc).__name__} at {where}: {text}" if where else f"{type(exc).__name__}: {text}"
    text = one_line(exc)
    if "ptxas" in text and "stderr:" in text:  # ptxas's log follows its exit code: keep the log's first error
        text = text.split("stderr:", 1)[1].split(" Repro command")[0].strip()
    return re.sub(r" at 0x[0-9a-f]+", "", text)
