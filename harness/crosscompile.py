"""Cross-compile report: the Triton kernels a submission would launch on each AMD (and NVIDIA) target,
compiled offline for it, with what they cost there, on a machine without that GPU.

    python -m harness.crosscompile --submission FILE [--target gfx950 --target gfx942] [--task task.yml]

The kernels are planned as a run on the target plans them. A file picks its variant at run time from
what PyTorch says about the GPU (torch.version.hip, torch.cuda.get_device_properties: gcnArchName,
multi_processor_count; get_device_capability) and from its tensors' device; for each target, a
process of its own makes torch report that target's GPU (TARGET_DEVICES: MI355X for gfx950, ...),
hands the file the task's small test cases as tensors on "cuda" (PyTorch's FakeTensor: shapes,
dtypes, strides and storage offsets, no values) and records each launch instead of running it; the
file's own code decides everything on the way, exactly as on that GPU. Where that cannot work (the
file reads tensor values on the host, or no device is known for the target) the target's kernels
are those the file launches on the CPU in Triton's interpreter, and the report says so and why.

Processes; the submission is untrusted code, so every one that runs it is inside the OS sandbox
(harness/launch.py's `bwrap_command`, as for a worker):
  * the parent (`cross_compile_report`): starts the sandboxed child and reads its JSON report strictly
    (size cap, every field's type checked); it never imports the submission;
  * the child (`--child`): starts one target process per target with a known GPU (at most as many
    at a time as there are CPU cores); for the targets whose launches cannot be planned that way, it
    captures the launches on the CPU under Triton's interpreter itself and starts the compile
    process for them;
  * a target process (`--target-stage`): the target's GPU as above, the launches recorded
    (deduplicated by what Triton specializes a compiled kernel on: argument types and alignment,
    constexpr values, launch options), then each rebuilt exactly as a launch there would bind it
    (Triton's own argument binder and option parser for that target's backend), compiled offline,
    and the compiler's numbers read: registers, spills, LDS / shared memory, the matrix
    instructions in the assembly;
  * the compile process (`--compile-stage`): the same compiling, for launches captured on the CPU.

This is a diagnostic: nothing is ranked on it, and a submission can forge what its own processes
report. `--set NAME=VALUE` (a constexpr) and `--option NAME=VALUE` (a launch option) change the
recorded launches before compiling, to see what another setting would cost. Shapes matter: the
task's small cases may not reach a file's long-sequence settings. Input dtypes are the task's on the
CPU (its fp8 is OCP e4m3 for every target).

Output: per target, how its launches were planned and the settings each kernel shares, then a table
laid out for the terminal's width (`CompileReport`; `--markdown FILE` writes the rows as Markdown,
`--json FILE` the rows themselves). Exit code 0 when every kernel compiled for every target, 1
otherwise, 2 for bad usage.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

from harness.channel import markdown_code, printable, printable_line

DEFAULT_TARGETS = ("gfx950", "gfx942")
REPORT_LIMIT = 4 << 20      # bytes of the child's JSON report the parent reads
TEXT_LIMIT = 600            # characters kept of any one string in a report
DEFAULT_TIMEOUT = 900       # seconds for capture and every compile together


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


class CrossCompileError(RuntimeError):
    """The report could not be made; the message is one line saying why."""


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


# ---------------------------------------------------------------------------------------------
# The compiler's numbers (pure functions of its output).
# ---------------------------------------------------------------------------------------------
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
    from harness.channel import one_line

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


# ---------------------------------------------------------------------------------------------
# The parent: start the sandboxed capture process, read its report strictly.
# ---------------------------------------------------------------------------------------------
_INT = (int, type(None))
# One report row: a kernel specialization on one target.
#   kernel, target; status (STATUSES), error (the compiler's one line, or a named message);
#   launches (calls seen on the CPU; 0 for an autotuning configuration that was only recorded), cases;
#   signature (argument types), constexprs, options (launch options), overrides (--set / --option
#   applied), compile_args (exactly what went to triton.compile: signature, constexprs and attrs by
#   argument index, options);
#   vgpr (AMD: .vgpr_count, architectural VGPRs and AGPRs together; NVIDIA: registers per thread),
#   agpr, sgpr, spill_vgpr, spill_sgpr, scratch_bytes (per lane / thread), lds_bytes (LDS / shared
#   memory per workgroup), occupancy (waves per SIMD) and occupancy_limit (what limits it),
#   compiler_occupancy (LLVM's own figure, registers only), num_warps;
#   matrix (matrix instructions in the assembly), uses_dot (the kernel has a tl.dot), notes;
#   plan (how the launches were planned: "as on" the target's device, or PLANNED_ON_CPU and why) and
#   on_target (whether as on the target's device).
ROW_FIELDS: dict[str, Any] = {
    "kernel": str, "target": str, "plan": str, "on_target": bool, "status": str, "error": (str, type(None)),
    "launches": int, "cases": list,
    "signature": dict, "constexprs": dict, "options": dict, "overrides": list, "compile_args": dict,
    "vgpr": _INT, "agpr": _INT, "sgpr": _INT, "spill_vgpr": _INT, "spill_sgpr": _INT, "scratch_bytes": _INT,
    "lds_bytes": _INT, "occupancy": _INT, "occupancy_limit": str, "compiler_occupancy": _INT,
    "num_warps": _INT, "matrix": list, "uses_dot": bool, "notes": list,
}
STATUSES = ("compiled", "failed", "won't launch", "skipped")


def cross_compile_report(submission: Path, targets: list[str], task: Path, sandbox: str = "auto", *,
                         cases: Optional[int] = None, constexprs: Sequence[str] = (), options: Sequence[str] = (),
                         private: Sequence[Path] = (), timeout: float = DEFAULT_TIMEOUT) -> list[dict]:
    """One row per (captured kernel specialization, target): see ROW_FIELDS and `CompileReport`; each
    row also says whether the submission ran "sandboxed". `cases`: only the first N small test cases.
    `constexprs` / `options`: "NAME=VALUE" overrides applied to every captured launch before
    compiling. `private`: paths the sandbox hides (the results database, the logs). Raises
    CrossCompileError (one line) when no report can be made, SandboxUnavailable for
    sandbox="require" where there is no sandbox, ValueError for a bad target or override."""
    from harness.launch import bwrap_command, child_env, child_view, find_bwrap, use_sandbox, worker_folder

    submission, task = Path(submission).resolve(), Path(task).resolve()
    for name in targets:
        parse_target(name)
    for text in (*constexprs, *options):
        if not re.fullmatch(r"[A-Za-z_]\w*=.+", text):
            raise ValueError(f"{text!r}: an override is NAME=VALUE")
    for path, what in ((submission, "submission"), (task, "task file")):
        if not path.is_file():
            raise CrossCompileError(f"{path}: {what} not found")
    sandboxed = use_sandbox(sandbox)
    child = [sys.executable, "-m", "harness.crosscompile", "--child", "--submission", str(submission),
             "--task", str(task), *(f"--target={t}" for t in targets), *(f"--set={c}" for c in constexprs),
             *(f"--option={o}" for o in options), *(["--cases", str(cases)] if cases else [])]
    env = child_env()
    env.pop("TRITON_INTERPRET", None)
    with worker_folder("mla-eval-xc-") as scratch, worker_folder("mla-eval-xc-out-") as outside:
        box = None
        if sandboxed:  # (its working folder is then a tmpfs of the sandbox's own)
            box = bwrap_command(find_bwrap(), submission, private, **child_view(Path(__file__), task))
            command = box + child
        else:
            (Path(scratch) / "triton-cache").mkdir()
            command = child
            env.update(HOME=scratch, TRITON_CACHE_DIR=str(Path(scratch) / "triton-cache"))
        code, raw, err_tail = _run(command, env, Path(scratch), Path(outside), timeout, box)
    if code != 0 and not raw.strip():
        last = [line for line in err_tail.splitlines() if line.strip()][-1:] or ["no output"]
        raise CrossCompileError(f"the cross-compile process exited with code {code}: {printable_line(last[0])[:TEXT_LIMIT]}")
    rows, problem = read_report(raw)
    if problem and not rows:
        raise CrossCompileError(problem)
    for row in rows:
        row["sandboxed"] = sandboxed
        if problem:
            row["notes"].append(problem)
    return rows


def _run(command: list[str], env: dict, scratch: Path, outside: Path, timeout: float, box=None) -> tuple[int, bytes, str]:
    """Run the capture process (harness/launch.py, run_captured: its output through pipes into files
    of `outside`; `box`, the sandbox the command starts with); (exit code, its report: at most
    REPORT_LIMIT bytes of stdout, the end of stderr)."""
    from harness.launch import run_captured

    try:
        code, raw, overflowed, err_tail = run_captured(command, env, scratch, outside, timeout, REPORT_LIMIT, box=box)
    except subprocess.TimeoutExpired:
        raise CrossCompileError(f"the cross-compile run took over {timeout:.0f} s and was stopped") from None
    if overflowed:
        raise CrossCompileError(f"the report is larger than {REPORT_LIMIT} bytes")
    return code, raw, err_tail


def read_report(raw: bytes) -> tuple[list[dict], Optional[str]]:
    """(rows, a one-line problem or None) from the child's JSON report, every field checked against
    ROW_FIELDS; anything malformed raises CrossCompileError."""
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # (deep nesting: RecursionError)
        raise CrossCompileError(f"the report is not valid JSON ({printable(str(exc)[:120])})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
        raise CrossCompileError("the report is not an object with a list of rows")
    problem = doc.get("problem")
    if problem is not None and not isinstance(problem, str):
        raise CrossCompileError("the report's problem is not a string")
    return [_checked_row(i, row) for i, row in enumerate(doc["rows"])], problem and problem[:TEXT_LIMIT]


def _checked_row(index: int, row: Any) -> dict:
    if not isinstance(row, dict):
        raise CrossCompileError(f"report row {index} is not an object")
    out = {}
    for key, kind in ROW_FIELDS.items():
        value = row.get(key)
        if not isinstance(value, kind) or (kind is _INT and isinstance(value, bool)):
            raise CrossCompileError(f"report row {index}: {key} is {type(value).__name__}")
        out[key] = _clip(value)
    if out["status"] not in STATUSES:
        raise CrossCompileError(f"report row {index}: unknown status {out['status'][:40]!r}")
    for key in ("cases", "notes", "matrix", "overrides"):
        if not all(isinstance(item, str) for item in out[key]):
            raise CrossCompileError(f"report row {index}: {key} holds a non-string")
    return out


def _clip(value: Any, depth: int = 0) -> Any:
    """`value` with every string cut at TEXT_LIMIT characters (a JSON tree from the report)."""
    if depth > 8:
        raise CrossCompileError("the report nests too deep")
    if isinstance(value, str):
        return printable(value[:TEXT_LIMIT])
    if isinstance(value, list):
        return [_clip(item, depth + 1) for item in value]
    if isinstance(value, dict):
        return {printable(str(k)[:TEXT_LIMIT]): _clip(v, depth + 1) for k, v in value.items()}
    return value



# ---------------------------------------------------------------------------------------------
# Presentation.
# ---------------------------------------------------------------------------------------------
def _value_text(value: Any) -> str:
    if isinstance(value, dict):
        if "dtype" in value:
            return str(value["dtype"])
        if "tuple" in value:
            return "(" + ",".join(map(_value_text, value["tuple"])) + ")"
        return str(next(iter(value.values()), "?"))
    return str(value)


def specialization_labels(rows: Sequence[dict]) -> list[str]:
    """A short name per row: the kernel, the constexprs that differ between its specializations in
    this report, and its launch options (num_warps as warps=, ...); values set by an override are
    left out (they are the same on every row: the title names them)."""
    varying: dict[str, set] = {}
    for row in rows:
        for name, value in row["constexprs"].items():
            varying.setdefault(f"{row['kernel']}.{name}", set()).add(json.dumps(value, sort_keys=True))
    labels = []
    for row in rows:
        overridden = {text.split("=", 1)[0] for text in row["overrides"]}
        parts = [f"{name}={_value_text(value)}" for name, value in row["constexprs"].items()
                 if len(varying[f"{row['kernel']}.{name}"]) > 1 and name not in overridden]
        parts += [f"{name.removeprefix('num_')}={_value_text(value)}" for name, value in row["options"].items()
                  if name not in overridden]
        labels.append(" ".join([row["kernel"], *parts]))
    return labels


def _kib(n: Optional[int]) -> str:
    return "-" if n is None else "0" if n == 0 else f"{n / 1024:.1f} KiB"


COLUMNS = ("kernel", "target", "status", "VGPR (AGPR)", "SGPR", "spills", "LDS", "waves/SIMD",
           "matrix instructions", "notes")


def _table_cells(rows: Sequence[dict]) -> list[list[str]]:
    """One list of COLUMNS texts per row."""
    out = []
    for label, row in zip(specialization_labels(rows), rows):
        vgpr = "-" if row["vgpr"] is None else f"{row['vgpr']}" + (f" ({row['agpr']})" if row["agpr"] else "")
        spill = ("-" if row["status"] not in ("compiled", "won't launch") else f"{row['scratch_bytes']} B"
                 if row["scratch_bytes"] else "in regs" if row["spill_vgpr"] or row["spill_sgpr"] else "0")
        waves = "-" if row["occupancy"] is None else f"{row['occupancy']} ({row['occupancy_limit']})"
        matrix = ", ".join(row["matrix"]) or ("none" if row["uses_dot"] else "-")
        notes = "; ".join(([row["error"]] if row["error"] else []) + row["notes"])
        out.append([label, row["target"], row["status"], vgpr, "-" if row["sgpr"] is None else str(row["sgpr"]),
                    spill, _kib(row["lds_bytes"]), waves, matrix, notes])
    return out


_AMD_KIND = re.compile(r"v_(mfma|smfmac|wmma|swmmac)(_scale)?_[a-z0-9]+_\d+x\d+x\d+_?(\w*)")
_PTX_TYPE = re.compile(r"(?:kind::)?(b?f16|tf32|f32|f64|e[45]m[23]|e[23]m[123]|[su][48]|f8f6f4|mxf\w+)")


def matrix_kind(name: str) -> str:
    """What a matrix instruction multiplies, short: AMD's operand type ("bf16", "f32", "xf32", "f8f6f4
    scaled" for the scaled MFMA, "... sparse" for smfmac, "... wmma"); NVIDIA's instruction and A
    operand type ("mma bf16", "wgmma e4m3")."""
    match = _AMD_KIND.fullmatch(name)
    if match:
        op, scaled, operands = match.groups()
        return " ".join(filter(None, [operands or "?", "scaled" if scaled else "",
                                      {"smfmac": "sparse", "wmma": "wmma", "swmmac": "sparse wmma"}.get(op, "")]))
    parts = name.split(".")
    types = [m.group(1) for m in map(_PTX_TYPE.fullmatch, parts[1:]) if m]
    return f"{parts[0]} {types[1] if len(types) > 1 else types[0] if types else '?'}"


def _matrix_cell(row: dict) -> str:
    return ", ".join(sorted({matrix_kind(n) for n in row["matrix"]})) or ("none" if row["uses_dot"] else "-")


def _shown_settings(row: dict) -> list[tuple[str, Any]]:
    """A row's constexprs, then its launch options, as (name, value): those selecting a code path
    (booleans, strings, dtypes, None) first, each group in the kernel's order."""
    constexprs = list(row["constexprs"].items())
    switch = [(n, v) for n, v in constexprs if v is None or isinstance(v, (bool, str)) or
              (isinstance(v, dict) and "dtype" in v)]
    return switch + [item for item in constexprs if item not in switch] + list(row["options"].items())


def variants(rows: Sequence[dict]) -> dict[str, tuple[str, list[str]]]:
    """Per kernel of `rows` (one target's): the settings every launch of it shares there, its
    variant ("QK_SCALED=True DOT_DTYPE=bf16 ... num_warps=4"), and per row (in order) the settings
    that set it apart from the kernel's other specializations ("NUM_SPLITS=2")."""
    by_kernel: dict[str, list[dict]] = {}
    for row in rows:
        by_kernel.setdefault(row["kernel"], []).append(row)
    out: dict[str, tuple[str, list[str]]] = {}
    for kernel, group in by_kernel.items():
        settings = [_shown_settings(row) for row in group]
        texts = [[f"{name}={_value_text(value)}" for name, value in items] for items in settings]
        shared = [text for text in texts[0] if all(text in other for other in texts[1:])]
        out[kernel] = (" ".join(shared), [" ".join(t for t in own if t not in shared) for own in texts])
    return out


_STATUS_STYLE = {"compiled": "green", "failed": "red", "won't launch": "red", "skipped": "yellow"}
_HEADERS = ("#", "kernel", "status", "VGPR\n(AGPR)", "SGPR", "scratch", "LDS", "waves\nper SIMD", "matrix")


def _spill_cell(row: dict) -> str:
    return ("-" if row["status"] not in ("compiled", "won't launch") else f"{row['scratch_bytes']} B"
            if row["scratch_bytes"] else "in regs" if row["spill_vgpr"] or row["spill_sgpr"] else "0")


def _numbers(row: dict) -> list[str]:
    """VGPR (AGPR), SGPR, scratch, LDS, waves per SIMD (what limits them) of a row, as shown."""
    vgpr = "-" if row["vgpr"] is None else f"{row['vgpr']}" + (f" ({row['agpr']})" if row["agpr"] else "")
    waves = "-" if row["occupancy"] is None else f"{row['occupancy']} ({row['occupancy_limit']})"
    return [vgpr, "-" if row["sgpr"] is None else str(row["sgpr"]), _spill_cell(row), _kib(row["lds_bytes"]), waves]


def _refs(numbers: Sequence[int]) -> str:
    """1, 2, 3, 5 -> "1-3, 5"."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(f"{run[0]}-{run[-1]}" if len(run) > 2 else ", ".join(map(str, run)) for run in runs)


class CompileReport:
    """One submission's report, laid out for the width it is printed at (`console.print` passes it).
    A title; then per target: how its launches were planned (as on its GPU, or on the CPU and why),
    each kernel's shared settings there (its variant), and its specializations, numbered: a table
    while every column fits whole (kernel names and numbers are never folded), else one short
    paragraph each; under a table, the matrix instructions in full and the notes, each once with the
    numbers of the rows it concerns."""

    def __init__(self, rows: Sequence[dict], name: str, targets: Sequence[str], detail: str = ""):
        self.rows, self.name, self.detail = list(rows), name, detail
        self.targets = list(dict.fromkeys([*targets, *(row["target"] for row in self.rows)]))

    def __rich_console__(self, console: Any, options: Any):
        from rich.padding import Padding
        from rich.text import Text

        yield Text(f"{self.name}: Triton kernels compiled for {', '.join(self.targets)}, offline{self.detail}",
                   style="bold")
        if self.rows and not self.rows[0].get("sandboxed", True):
            yield Text(f"warning: {self.name} ran without the OS sandbox", style="yellow")
        for target in self.targets:
            rows = [row for row in self.rows if row["target"] == target]
            if not rows:
                continue
            plans = list(dict.fromkeys(row["plan"] for row in rows))
            on_target = all(row["on_target"] for row in rows)
            yield Text.assemble("\n", (target, "bold"), ": ", ("; ".join(plans) or "planned: unknown",
                                                                "" if on_target else "yellow"))
            shared = variants(rows)
            for kernel, (settings, _) in shared.items():
                yield Padding(Text.assemble((kernel, "bold"), ": ", settings or "(no settings)"), (0, 0, 0, 2),
                              expand=False)
            labels = self._labels(rows, shared)
            table = self._table(rows, labels, console, options)
            if table is None:
                yield from self._paragraphs(rows, labels)
                continue
            yield table
            yield from self._below(rows)

    @staticmethod
    def _labels(rows: Sequence[dict], shared: dict) -> list[str]:
        """Per row: its kernel and what sets the row apart from the kernel's other specializations."""
        seen: dict[str, int] = {}
        labels = []
        for row in rows:
            index = seen[row["kernel"]] = seen.get(row["kernel"], -1) + 1
            labels.append(" ".join(filter(None, [row["kernel"], shared[row["kernel"]][1][index]])))
        return labels

    @staticmethod
    def _table(rows: Sequence[dict], labels: Sequence[str], console: Any, options: Any):
        """The table of `rows` if it fits whole (no column folded): each label and matrix cell on one
        line, or else the label's kernel over what sets the row apart and the matrix kinds one per
        line; None if neither fits."""
        from rich.measure import Measurement
        from rich.table import Table
        from rich.text import Text

        for stacked in (False, True):
            table = Table()
            for header in _HEADERS:
                table.add_column(header, justify="left" if header in ("kernel", "status", "matrix") else "right",
                                 no_wrap=True)
            for number, (label, row) in enumerate(zip(labels, rows), 1):
                matrix = _matrix_cell(row)
                if stacked:
                    label, matrix = label.replace(" ", "\n", 1), matrix.replace(", ", "\n")
                status = Text(row["status"], style=_STATUS_STYLE.get(row["status"], ""))
                table.add_row(str(number), Text(label), status, *map(Text, _numbers(row)), Text(matrix))
            if Measurement.get(console, options.update_width(100_000), table).maximum <= options.max_width:
                return table
        return None

    @staticmethod
    def _details(row: dict) -> list[str]:
        return ([f"matrix instructions: {', '.join(row['matrix'])}"] if row["matrix"] else []) + \
            ([row["error"]] if row["error"] else []) + row["notes"]

    def _below(self, rows: Sequence[dict]):
        """Each detail of the rows once, after the numbers of the rows it concerns."""
        from rich.padding import Padding
        from rich.text import Text

        where: dict[str, list[int]] = {}
        for number, row in enumerate(rows, 1):
            for text in self._details(row):
                where.setdefault(text, []).append(number)
        for text, numbers in where.items():
            yield Padding(Text.assemble((_refs(numbers), "bold"), ": ", text), (0, 0, 0, 2), expand=False)

    def _paragraphs(self, rows: Sequence[dict], labels: Sequence[str]):
        """Narrow: each row as a paragraph (its number, label and status; its numbers; its details)."""
        from rich.padding import Padding
        from rich.text import Text

        for number, (label, row) in enumerate(zip(labels, rows), 1):
            yield Text.assemble((f"{number} ", "bold"), (label, "bold"), ": ",
                                (row["status"], _STATUS_STYLE.get(row["status"], "")))
            for line in filter(None, [_summary(row), *self._details(row)]):
                yield Padding(Text(line), (0, 0, 0, 2), expand=False)


def _summary(row: dict) -> str:
    """A row's numbers in words: "238 VGPRs, 58 SGPRs, no scratch, LDS 16.0 KiB, 2 waves per SIMD
    (VGPR)" (NVIDIA: registers, local memory, shared memory)."""
    amd = not row["target"].startswith("sm")
    parts = []
    if row["vgpr"] is not None:
        parts.append(f"{row['vgpr']} {'VGPRs' if amd else 'registers'}"
                     + (f" ({row['agpr']} AGPRs)" if row["agpr"] else ""))
    if row["sgpr"] is not None:
        parts.append(f"{row['sgpr']} SGPRs")
    spill = _spill_cell(row)
    if spill != "-":
        memory = "scratch" if amd else "local memory"
        parts.append(f"no {memory}" if spill == "0" else "spills in registers" if spill == "in regs"
                     else f"{spill} of {memory}")
    if row["lds_bytes"] is not None:
        parts.append(f"{'LDS' if amd else 'shared memory'} {_kib(row['lds_bytes'])}")
    if row["occupancy"] is not None:
        waves = f"{row['occupancy']} wave{'' if row['occupancy'] == 1 else 's'}"
        parts.append(f"{waves} per SIMD ({row['occupancy_limit']})")
    return ", ".join(parts)


def report_markdown(rows: Sequence[dict]) -> str:
    """The rows as a Markdown table (for BENCHMARKS.md and reviews): COLUMNS, one line per kernel
    specialization and target."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join("---" for _ in COLUMNS) + "|"]
    lines += ["| " + " | ".join(markdown_code(cell) for cell in cells) + " |" for cells in _table_cells(rows)]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# Capturing (sandboxed): the submission's launches on the task's small cases, as on a target's GPU
# (a target process) or on the CPU under Triton's interpreter (the child).
# ---------------------------------------------------------------------------------------------
def _claim_stdout():
    """The process's real stdout, kept for the report; file descriptor 1 (and with it sys.stdout and
    every child) now writes to stderr, so nothing the submission prints can mix into the JSON."""
    sys.stdout.flush()
    real = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    return real


def _int_class(value: int) -> str:
    """What Triton specializes a compiled kernel on for an integer argument: the value 1 (a
    constant), the width (i32 / i64 / u64) and whether 16 divides it."""
    if value == 1:
        return "one"
    width = "i32" if -2**31 <= value < 2**31 else "u64" if value >= 2**63 else "i64"
    return width + ("/16" if value % 16 == 0 else "")


def _constant(value: Any) -> Any:
    """A constexpr value as JSON: numbers, strings, None; {"dtype": name}, {"tuple": [...]},
    {"jit": "module:name"} for a Triton function; {"unsupported": type} otherwise."""
    value = getattr(value, "value", value) if type(value).__name__ == "constexpr" else value
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if type(value).__name__ == "dtype" and hasattr(value, "name"):
        return {"dtype": value.name}
    if isinstance(value, (tuple, list)):
        return {"tuple": [_constant(v) for v in value]}
    fn = getattr(value, "fn", None)
    if callable(fn):
        return {"jit": f"{fn.__module__}:{fn.__qualname__}"}
    return {"unsupported": type(value).__name__}


def _aligned(value: Any, tensor: Any) -> bool:
    """Whether a tensor argument's address is a multiple of 16. A FakeTensor (a target process's
    stand-in for device memory) has no address: there, whether its offset into its storage is (GPU
    allocators align every allocation to 256 bytes or more)."""
    from torch._subclasses.fake_tensor import FakeTensor

    if isinstance(tensor, FakeTensor):
        return tensor.storage_offset() * tensor.element_size() % 16 == 0
    return value.data_ptr() % 16 == 0


def _argument(value: Any) -> tuple[Any, Any]:
    """(how to rebuild a runtime argument for any target, its specialization key)."""
    import torch

    if hasattr(value, "data_ptr") and hasattr(value, "dtype"):  # a tensor, or triton.reinterpret's wrapper
        dtype = value.dtype
        name = str(dtype).removeprefix("torch.") if isinstance(dtype, torch.dtype) else {"tl": dtype.name}
        tensor = value if isinstance(value, torch.Tensor) else getattr(value, "base", value)
        try:
            size = int(tensor.untyped_storage().nbytes())
        except Exception:
            size = 0
        described = {"tensor": name, "aligned": _aligned(value, tensor), "bytes": size}
        return described, ["tensor", name, described["aligned"], size < 2**31]
    if isinstance(value, bool):
        return {"bool": value}, ["bool"]
    if isinstance(value, int):
        return {"int": value}, ["int", _int_class(value)]
    if isinstance(value, float):
        return {"float": value}, ["float"]
    if value is None:
        return {"none": True}, ["none"]
    if isinstance(value, tuple):
        parts = [_argument(v) for v in value]
        return {"tuple": [p[0] for p in parts]}, ["tuple", [p[1] for p in parts]]
    return {"unsupported": type(value).__name__}, ["unsupported", type(value).__name__]


class Recorder:
    """Replaces Triton's launch entry point and keeps one record per distinct specialization. Under
    the interpreter each launch is recorded, then run; in a target process (no GPU) it is recorded
    only: the launch returns None, and the kernel's outputs stay as the file allocated them. An
    autotuned kernel's configurations are all recorded (as warm-up launches) instead of timed, which
    needs a GPU; the first one is then launched."""

    def __init__(self):
        self.launches: dict[str, dict] = {}
        self.case = ""

    def install(self, execute: bool = True) -> None:
        from triton.runtime.autotuner import Autotuner

        recorder = self
        if execute:
            from triton.runtime.interpreter import InterpretedFunction

            original = InterpretedFunction.run

            def run(self, *args, grid, warmup, **kwargs):
                recorder.record(self.fn, args, kwargs, launched=not warmup)
                return original(self, *args, grid=grid, warmup=warmup, **kwargs)

            InterpretedFunction.run = run
        else:
            from triton.runtime.jit import JITFunction

            def record_only(self, *args, grid, warmup, **kwargs):
                recorder.record(self.fn, args, kwargs, launched=not warmup)

            JITFunction.run = record_only

        def bench(self, *args, config, **meta):
            self.fn.run(*args, **{**meta, "warmup": True}, **config.all_kwargs())
            return [float(self.configs.index(config))]  # "fastest" = the first configuration

        Autotuner._bench = bench

    def record(self, fn: Any, args: tuple, kwargs: dict, launched: bool = True) -> None:
        from triton.runtime.jit import _normalize_ty

        params = list(inspect.signature(fn).parameters)
        constexpr = {name for name, ty in inspect.get_annotations(fn).items() if _normalize_ty(ty) == "constexpr"}
        given = dict(zip(params, args))
        given.update({k: v for k, v in kwargs.items() if k in params})
        described, key = {}, []
        for name, value in given.items():
            if name in constexpr:
                described[name] = {"constexpr": _constant(value)}
                key.append([name, described[name]])
            else:
                described[name], part = _argument(value)
                key.append([name, part])
        options = {k: _constant(v) for k, v in kwargs.items() if k not in params}
        ident = json.dumps([fn.__module__, fn.__qualname__, key, options], sort_keys=True, default=str)
        entry = self.launches.setdefault(ident, {"module": fn.__module__, "kernel": fn.__qualname__,
                                                 "args": described, "options": options, "launches": 0, "cases": []})
        entry["launches"] += launched
        if self.case and self.case not in entry["cases"]:
            entry["cases"].append(self.case)


def _capture(submission: str, task: str, cases: Optional[int],
             device: Optional[TargetDevice] = None) -> tuple[list[dict], Optional[str], Optional[str]]:
    """Every distinct launch of the task's small test cases: on the CPU under the interpreter, or
    with `device` (installed by install_device before this) as a run on it launches them, the
    inputs on "cuda" (on_device). Returns (launches, the one-line reason the CPU run stopped early,
    the one-line reason the file cannot be planned as on `device`); None where there is none."""
    import torch

    from harness import compat
    from harness.channel import one_line
    from harness.problem import load_problem
    from harness.worker.loop import _load, _LoadError

    recorder = Recorder()
    recorder.install(execute=device is None)
    problem = load_problem(task)
    compat.install()
    try:
        kernel = _load(submission)
    except _LoadError as exc:
        if device is not None:
            return [], None, f"importing it as on {device.name} failed: {exc.kind}: {exc}"
        return [], f"loading {Path(submission).name}: {exc.kind}: {exc}", None
    if device is not None:
        import warnings

        from torch._subclasses.fake_tensor import FakeTensorMode

        # (a file that keys a cache on data_ptr() gets the storage offset, with a deprecation warning)
        warnings.filterwarnings("ignore", message="Accessing the data pointer of FakeTensor")
    for case in problem.spec.cases("test", small=True)[:cases]:
        recorder.case = problem.label(case.args)
        data = problem.generate(case.args, case.seed, torch.device("cpu"))
        try:
            if device is None:
                kernel(data)
                continue
            with FakeTensorMode(allow_non_fake_inputs=True):
                kernel(on_device(data))
        except BaseException as exc:  # the submission's fault, or what a GPU-less process lacks
            if device is not None:
                return [], None, f"custom_kernel raised on case {recorder.case} as on {device.name}: {one_line(exc)}"
            stopped = f"custom_kernel raised on case {recorder.case}: {one_line(exc)}"
            return list(recorder.launches.values()), stopped, None
    return list(recorder.launches.values()), None, None


@dataclasses.dataclass
class _Stage:
    """What a target or compile process reported (its JSON lines), and how it ended."""

    launches: Optional[list] = None      # the launches it compiles (a target process says them first)
    rows: list = dataclasses.field(default_factory=list)
    problem: Optional[str] = None
    fallback: Optional[str] = None       # why the target's launches must come from the CPU instead
    code: int = 0


def _run_stage(flag: str, payload: dict, env: dict) -> _Stage:
    """Start `python -m harness.crosscompile FLAG`, hand it `payload` on stdin, read its lines."""
    stage = _Stage()
    process = subprocess.Popen([sys.executable, "-m", "harness.crosscompile", flag], env=env,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    process.stdin.write(json.dumps(payload))
    process.stdin.close()
    for line in process.stdout:
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if not isinstance(item, dict):
            continue
        if "kernel" in item and "target" in item:  # a row
            stage.rows.append(item)
            continue
        if isinstance(item.get("launches"), list):
            stage.launches = item["launches"]
        if isinstance(item.get("rows"), list):  # rows together (the form of the child's own report)
            stage.rows += [row for row in item["rows"] if isinstance(row, dict)]
        if isinstance(item.get("problem"), str):
            stage.problem = item["problem"]
        if isinstance(item.get("fallback"), str):
            stage.fallback = item["fallback"]
    stage.code = process.wait()
    return stage


def _finished(stage: _Stage, targets: Sequence[str], plan: str, on_target: bool) -> list[dict]:
    """A stage's rows for `targets`, each saying how its launches were planned, and a failed row for
    every (launch, target) a stage that ended in an error never reported; its problem in every note."""
    rows = list(stage.rows)
    done = {(row.get("index"), row.get("target")) for row in rows}
    lost = f"the compile process ended with code {stage.code} before finishing this kernel"
    for index, launch in enumerate(stage.launches or []):
        for target in targets:
            if (index, target) not in done and stage.code != 0:
                rows.append(_row(launch, target, status="failed", error=lost))
    for row in rows:
        row.update(plan=plan, on_target=on_target)
        if stage.problem and isinstance(row.get("notes"), list):
            row["notes"].append(stage.problem)
    return rows


def _child_main(args: argparse.Namespace) -> int:
    """The child: a target process per target with a known GPU; the launches of the others (and of
    any the file cannot be planned for as on its GPU) captured here on the CPU under the interpreter
    and compiled by a compile process. Writes {"rows": [...], "problem": ...} to its stdout; a target
    process ended before reporting anything (the submission exited) ends it with the same code."""
    from concurrent.futures import ThreadPoolExecutor

    report = _claim_stdout()
    targets = list(dict.fromkeys(args.target or DEFAULT_TARGETS))
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    devices = {target: target_device(target) for target in targets}
    planned = [target for target in targets if devices[target] is not None]
    payload = {"submission": args.submission, "task": args.task, "cases": args.cases, "constexprs": args.set,
               "options": args.option}
    with ThreadPoolExecutor(max(1, min(len(planned), os.cpu_count() or 1))) as pool:
        stages = dict(zip(planned, pool.map(lambda t: _run_stage("--target-stage", {**payload, "target": t}, env),
                                            planned)))
    rows: list[dict] = []
    problems: list[str] = []
    on_cpu = {t: NO_DEVICE.format(target=t, known=", ".join(TARGET_DEVICES)) for t in targets if devices[t] is None}
    for target, stage in stages.items():
        if stage.fallback is not None:
            on_cpu[target] = stage.fallback
        elif stage.launches is None and not stage.rows and stage.code != 0:
            return stage.code if stage.code > 0 else 128 - stage.code  # (a signal: 128 + its number)
        else:
            rows += _finished(stage, [target], PLANNED_ON_TARGET.format(device=devices[target].describe()), True)
            problems += [stage.problem] if stage.problem else []
    if on_cpu:
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported: kernels become interpreted functions
        launches, problem, _ = _capture(args.submission, args.task, args.cases)
        try:
            launches = apply_overrides(launches, args.set, args.option)
        except ValueError as exc:
            launches, problem = [], str(exc)
        stage = _Stage(launches=launches, problem=problem)
        if launches:
            stage = _run_stage("--compile-stage", {"submission": args.submission, "launches": launches,
                                                   "targets": list(on_cpu)}, env)
            stage.launches, stage.problem = launches, stage.problem or problem
        for target, why in on_cpu.items():
            device = devices[target]
            plan = PLANNED_ON_CPU.format(device=device.name if device else target, why=why)
            rows += _finished(dataclasses.replace(stage, rows=[r for r in stage.rows if r.get("target") == target]),
                              [target], plan, False)
        problems += [stage.problem] if stage.problem else []
    order = {target: i for i, target in enumerate(targets)}
    rows.sort(key=lambda row: (order.get(row.get("target"), len(order)), row.get("index") or 0))
    report.write(json.dumps({"rows": rows, "problem": None if rows else (problems[0] if problems else None)}))
    report.close()
    return 0


def _target_stage_main() -> int:
    """A target process: reads {submission, task, cases, constexprs, options, target} on stdin; with
    the target's GPU installed, captures the launches ({"launches": [...], "problem": ...} first, or
    {"fallback": why} when they cannot be planned as there) and compiles each for the target (a
    line per row, as each is done), on stdout."""
    payload = json.loads(sys.stdin.read())
    report = _claim_stdout()

    def emit(item: dict) -> None:
        report.write(json.dumps(item) + "\n")
        report.flush()

    device = target_device(payload["target"])
    install_device(device)
    launches, problem, fallback = _capture(payload["submission"], payload["task"], payload["cases"], device)
    if fallback is not None:
        emit({"fallback": fallback})
        return 0
    try:
        launches = apply_overrides(launches, payload["constexprs"], payload["options"])
    except ValueError as exc:
        launches, problem = [], str(exc)
    emit({"launches": launches, "problem": problem})
    _compile_all(sys.modules.get("submission"), launches, [payload["target"]], emit)
    return 0


# ---------------------------------------------------------------------------------------------
# The compile process (sandboxed, no interpreter): every launch rebuilt and compiled per target.
# ---------------------------------------------------------------------------------------------
def _row(launch: dict, target: str, **fields: Any) -> dict:
    row = {"kernel": launch["kernel"], "target": target, "plan": "", "on_target": False, "status": "compiled",
           "error": None, "launches": launch["launches"], "cases": launch["cases"],
           "overrides": launch.get("overrides", []),
           "signature": {name: _type_text(d) for name, d in launch["args"].items() if "constexpr" not in d},
           "constexprs": {name: d["constexpr"] for name, d in launch["args"].items() if "constexpr" in d},
           "options": launch["options"], "compile_args": {}, "vgpr": None, "agpr": None, "sgpr": None,
           "spill_vgpr": None, "spill_sgpr": None, "scratch_bytes": None, "lds_bytes": None, "occupancy": None,
           "occupancy_limit": "", "compiler_occupancy": None, "num_warps": None, "matrix": [], "uses_dot": False,
           "notes": []}
    row.update(fields)
    return row


def _type_text(described: dict) -> str:
    if "tensor" in described:
        dtype = described["tensor"]
        return "*" + (dtype["tl"] if isinstance(dtype, dict) else dtype)
    return next(iter(described))


def _parse_value(text: str) -> Any:
    """An override's VALUE: a number, true / false / none, or a Triton dtype name (bf16, float16, ...)."""
    import triton.language as tl

    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    lowered = text.lower()
    if lowered in ("true", "false", "none"):
        return {"true": True, "false": False, "none": None}[lowered]
    dtype = getattr(tl, text.removeprefix("tl."), None)
    if isinstance(dtype, tl.dtype):
        return {"dtype": dtype.name}
    try:
        return {"dtype": tl.dtype(text).name}
    except Exception:
        return text


def apply_overrides(launches: list[dict], constexprs: Sequence[str], options: Sequence[str]) -> list[dict]:
    """`launches` with each NAME=VALUE constexpr set wherever a kernel has that constexpr and each
    launch option set everywhere, deduplicated again; ValueError naming a constexpr no kernel has."""
    sets = [(text.split("=", 1)[0], _parse_value(text.split("=", 1)[1]), text) for text in constexprs]
    for name, _, text in sets:
        if not any("constexpr" in launch["args"].get(name, {}) for launch in launches):
            raise ValueError(f"--set {text}: no captured kernel has a constexpr parameter {name}")
    merged: dict[str, dict] = {}
    for launch in launches:
        launch = json.loads(json.dumps(launch))
        launch["overrides"] = []
        for name, value, text in sets:
            if "constexpr" in launch["args"].get(name, {}):
                launch["args"][name] = {"constexpr": value}
                launch["overrides"].append(text)
        for text in options:
            name, value = text.split("=", 1)
            launch["options"][name] = _parse_value(value)
            launch["overrides"].append(text)
        key = json.dumps([launch["module"], launch["kernel"], launch["args"], launch["options"]], sort_keys=True)
        if key in merged:
            merged[key]["launches"] += launch["launches"]
            merged[key]["cases"] += [c for c in launch["cases"] if c not in merged[key]["cases"]]
        else:
            merged[key] = launch
    return list(merged.values())


class _TensorStandIn:
    """What Triton's argument binder reads from a tensor: its dtype, whether its address is 16-byte
    aligned, and how many bytes it spans (AMD's buffer loads need it under 2 GiB)."""

    def __init__(self, dtype: Any, aligned: bool, nbytes: int):
        self.dtype, self._aligned, self._nbytes = dtype, aligned, nbytes

    def data_ptr(self) -> int:
        return 0 if self._aligned else 8

    def ptr_range(self) -> int:
        return self._nbytes


def _rebuild(described: dict, registry: dict) -> Any:
    import torch
    import triton.language as tl

    if "constexpr" in described:
        return _rebuild_constant(described["constexpr"], registry)
    if "tensor" in described:
        dtype = described["tensor"]
        dtype = tl.dtype(dtype["tl"]) if isinstance(dtype, dict) else getattr(torch, dtype)
        return _TensorStandIn(dtype, bool(described["aligned"]), int(described["bytes"]))
    if "tuple" in described:
        return tuple(_rebuild(d, registry) for d in described["tuple"])
    if "unsupported" in described:
        raise TypeError(f"cannot rebuild an argument of type {described['unsupported']}")
    return None if "none" in described else next(iter(described.values()))


def _rebuild_constant(value: Any, registry: dict) -> Any:
    import triton.language as tl

    if not isinstance(value, dict):
        return value
    if "dtype" in value:
        return tl.dtype(value["dtype"])
    if "tuple" in value:
        return tuple(_rebuild_constant(v, registry) for v in value["tuple"])
    if "jit" in value and value["jit"] in registry:
        return registry[value["jit"]]
    raise TypeError(f"cannot rebuild a constexpr {value}")


def _lookup(module: Any, launch: dict, registry: dict) -> Any:
    """The JIT function of a captured launch: Triton's registry of every function it has wrapped
    (keyed module:qualname), else the module's attribute path."""
    found = registry.get(f"{launch['module']}:{launch['kernel']}")
    if found is None:
        found = module
        for part in launch["kernel"].split("."):
            found = getattr(found, part, None)
    if found is None or not hasattr(found, "params"):
        raise LookupError(f"{launch['kernel']} is not a Triton function at import time (made inside a function?): "
                          "it cannot be rebuilt for compiling")
    return found


def _named_option_error(launch: dict, vendor: str) -> Optional[str]:
    """The named message when a launch passes another vendor's options (Triton then refuses it)."""
    from triton.backends.amd.compiler import HIPOptions
    from triton.backends.nvidia.compiler import CUDAOptions

    amd, nvidia = set(HIPOptions.__dataclass_fields__), set(CUDAOptions.__dataclass_fields__)
    names = sorted(launch["options"])
    if vendor == "cuda" and [n for n in names if n in amd - nvidia]:
        return AMD_OPTIONS_ON_NVIDIA.format(names=", ".join(n for n in names if n in amd - nvidia))
    if vendor == "hip" and [n for n in names if n in nvidia - amd]:
        return NVIDIA_OPTIONS_ON_AMD.format(names=", ".join(n for n in names if n in nvidia - amd))
    return None


def _first_source_line(fn: Any) -> Optional[int]:
    """The file line of the kernel's `def` (Triton numbers compile errors from it)."""
    try:
        lines, start = inspect.getsourcelines(fn.fn)
    except (OSError, TypeError, AttributeError):
        return None
    return start + next((i for i, line in enumerate(lines) if line.lstrip().startswith("def ")), 0)


def compile_launch(fn: Any, launch: dict, target_name: str, registry: dict) -> dict:
    """One captured launch compiled for one target, as a report row."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend

    vendor, arch, warp = parse_target(target_name)
    row = _row(launch, target_name)
    named = _named_option_error(launch, vendor)
    if named:
        row.update(status="failed", error=named)
        return row
    target = GPUTarget(vendor, arch, warp)
    try:
        backend = make_backend(target)
        kwargs = {name: _rebuild(d, registry) for name, d in launch["args"].items()}
        kwargs.update({k: _rebuild_constant(v, registry) for k, v in launch["options"].items()})
        kwargs["debug"] = kwargs.get("debug", getattr(fn, "debug", None))
        # Triton's own launch path (runtime/jit.py JITFunction.run), for this target's backend.
        binder = triton.runtime.jit.create_function_from_signature(fn.signature, fn.params, backend)
        bound, specialization, parsed = binder(**kwargs)
        options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound, specialization, parsed)
    except Exception as exc:
        row.update(status="failed", error=compile_error_line(exc))
        row["notes"] += fp8_traps(arch, row["signature"].values())
        return row
    row["num_warps"] = options.num_warps
    row["signature"] = {k: str(v) for k, v in signature.items() if v != "constexpr"}
    row["compile_args"] = {
        "signature": {k: str(v) for k, v in signature.items()},
        "constexprs": {",".join(map(str, k)): _constant(v) for k, v in constexprs.items()},
        "attrs": {",".join(map(str, k)): v for k, v in attrs.items()},
        "options": {k: v for k, v in launch["options"].items()},
    }
    try:
        kernel = triton.compile(ASTSource(fn, signature, constexprs, attrs), target=target, options=options.__dict__)
    except Exception as exc:
        row.update(status="failed", error=compile_error_line(exc, _first_source_line(fn)))
        row["notes"] += fp8_traps(arch, signature.values()) if vendor == "hip" else []
        return row
    row["lds_bytes"] = int(kernel.metadata.shared)
    row["uses_dot"] = uses_dot(kernel.asm.get("ttir", ""))
    if vendor == "hip":
        _amd_numbers(row, kernel, arch, options, signature.values())
    else:
        _nvidia_numbers(row, kernel, arch)
    if row["uses_dot"] and not row["matrix"]:
        row["notes"].append(NO_MATRIX)
    return row


def _amd_numbers(row: dict, kernel: Any, arch: str, options: Any, types: Iterable[str]) -> None:
    asm = kernel.asm["amdgcn"]
    row.update(parse_amdgcn(asm))
    row["matrix"] = matrix_instructions(asm, "hip")
    if any("scale" in name for name in row["matrix"]):
        row["notes"].append("scaled MFMA (fp8/fp4 with block scales)")
    if any(name.endswith("xf32") for name in row["matrix"]):
        row["notes"].append(XF32_MFMA)
    if row["vgpr"] is not None and row["sgpr"] is not None:
        row["occupancy"], row["occupancy_limit"] = amd_occupancy(arch, row["vgpr"], row["sgpr"], row["lds_bytes"],
                                                                 options.num_warps)
    spilled = dict(vgprs=row["spill_vgpr"] or 0, sgprs=row["spill_sgpr"] or 0, bytes=row["scratch_bytes"] or 0)
    if spilled["bytes"]:
        row["notes"].append(SPILLS.format(**spilled))
    elif spilled["vgprs"] or spilled["sgprs"]:
        row["notes"].append(SPILLS_IN_REGISTERS.format(**spilled))
    row["notes"] += fp8_traps(arch, types, kernel.asm.get("ttir", ""))
    if arch == "gfx950" and row["options"].get("kpack", 1) != 1:
        row["notes"].append(KPACK_ON_GFX950.format(value=row["options"]["kpack"]))
    asked = row["options"].get("waves_per_eu")
    if isinstance(asked, int) and asked > 0 and row["occupancy"] is not None and row["occupancy"] < asked:
        row["notes"].append(WAVES_NOT_MET.format(asked=asked, got=row["occupancy"]))
    limits = AMD_LIMITS.get(arch)
    if limits and row["lds_bytes"] > limits.lds_bytes:
        row["status"] = "won't launch"
        row["notes"].append(LDS_BEYOND_TARGET.format(need=row["lds_bytes"] / 1024, what="LDS", target=arch,
                                                     have=limits.lds_bytes / 1024))


def _nvidia_numbers(row: dict, kernel: Any, capability: int) -> None:
    from triton import knobs

    row["matrix"] = matrix_instructions(kernel.asm.get("ptx", ""), "cuda")
    try:
        with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
            cubin.write(kernel.asm["cubin"])
            cubin.flush()
            text = subprocess.run([knobs.nvidia.cuobjdump.path, "--dump-resource-usage", cubin.name],
                                  capture_output=True, text=True, timeout=60).stdout
        usage = parse_resource_usage(text)
        local = nvidia_local_bytes(usage)
        row.update(vgpr=usage.get("REG"), scratch_bytes=local)
        if local:
            row["notes"].append(NVIDIA_LOCAL.format(bytes=local))
    except Exception as exc:
        row["notes"].append(f"registers unknown: cuobjdump failed ({str(exc)[:120]})")
    limit = NVIDIA_SHARED_BYTES.get(capability)
    if limit and row["lds_bytes"] > limit:
        row["status"] = "won't launch"
        row["notes"].append(LDS_BEYOND_TARGET.format(need=row["lds_bytes"] / 1024, what="shared memory",
                                                     target=f"sm_{capability}", have=limit / 1024))


def _ptxas_problem(capability: int) -> Optional[str]:
    """Why NVIDIA targets cannot be compiled here (one line), or None."""
    try:
        from triton.backends.nvidia.compiler import get_ptxas

        path = get_ptxas(capability).path
    except Exception as exc:
        return f"ptxas not found ({str(exc)[:100]}): {NEED_PTXAS}"
    return None if path and os.path.exists(path) else f"ptxas not found: {NEED_PTXAS}"


def _compile_all(module: Any, launches: list[dict], targets: Sequence[str], emit: Any) -> None:
    """Each launch compiled for each target, each row emitted (with "index": the launch's) as it is
    done."""
    import triton

    registry = getattr(triton.runtime.jit, "_triton_jit_function_registry", {})
    for index, launch in enumerate(launches):
        try:
            fn, missing = _lookup(module, launch, registry), None
        except LookupError as exc:
            fn, missing = None, str(exc)
        for target in targets:
            vendor, arch, _ = parse_target(target)
            skip = _ptxas_problem(arch) if vendor == "cuda" else None
            if missing:
                row = _row(launch, target, status="failed", error=missing)
            elif skip:
                row = _row(launch, target, status="skipped", error=skip)
            else:
                row = compile_launch(fn, launch, target, registry)
            emit({**row, "index": index})


def _compile_stage_main() -> int:
    """The compile process, for launches captured on the CPU: reads {submission, launches, targets}
    on stdin, imports the submission without the interpreter and writes each row on stdout as a
    line of JSON as it is done (_compile_all; tools/plan_compile.py reads them too)."""
    payload = json.loads(sys.stdin.read())
    report = _claim_stdout()

    def emit(item: dict) -> None:
        report.write(json.dumps(item) + "\n")
        report.flush()

    from harness import compat
    from harness.channel import one_line
    from harness.worker.loop import load_module

    compat.install()
    try:
        module = load_module(payload["submission"])
    except BaseException as exc:
        emit({"problem": f"importing the submission without the interpreter failed: {one_line(exc)}"})
        return 0
    _compile_all(module, payload["launches"], payload["targets"], emit)
    return 0


# ---------------------------------------------------------------------------------------------
# Command line.
# ---------------------------------------------------------------------------------------------
def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.crosscompile",
                                     description="Which Triton kernels a submission launches compile for AMD / "
                                                 "NVIDIA targets, and their registers, spills, LDS and occupancy.")
    parser.add_argument("--submission", required=True)
    parser.add_argument("--target", action="append", help="gfx950, gfx942, sm_90, sm_100 (repeatable; "
                                                          "default gfx950 and gfx942)")
    parser.add_argument("--task", default=str(Path(__file__).resolve().parent.parent / "task.yml"))
    parser.add_argument("--cases", type=int, default=None, help="run only the first N small test cases")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="compile with this constexpr value instead of the captured one (e.g. DOT_DTYPE=bf16)")
    parser.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                        help="add this launch option to every launch (e.g. matrix_instr_nonkdim=16)")
    parser.add_argument("--sandbox", choices=("auto", "require", "off"), default="auto")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT)
    parser.add_argument("--json", help="write the report's rows to this file")
    parser.add_argument("--markdown", help="write the table to this file as Markdown")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--compile-stage", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--target-stage", action="store_true", help=argparse.SUPPRESS)
    if argv is None and "--compile-stage" in sys.argv[1:]:  # its input comes on stdin
        return _compile_stage_main()
    if argv is None and "--target-stage" in sys.argv[1:]:
        return _target_stage_main()
    args = parser.parse_args(argv)
    if args.child:
        return _child_main(args)

    from rich.console import Console

    from harness.launch import SandboxUnavailable

    targets = args.target or list(DEFAULT_TARGETS)
    try:
        rows = cross_compile_report(Path(args.submission), targets, Path(args.task), args.sandbox, cases=args.cases,
                                    constexprs=args.set, options=args.option, timeout=args.timeout)
    except (ValueError, SandboxUnavailable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except CrossCompileError as exc:
        print(f"{Path(args.submission).name}: {exc}", file=sys.stderr)
        return 1
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    if args.markdown:
        Path(args.markdown).write_text(report_markdown(rows))
    console = Console(highlight=False, emoji=False, width=None if Console().is_terminal else 200)
    overrides = ", ".join([*args.set, *args.option])
    return 0 if show_report(console, rows, Path(args.submission).name, targets,
                            f" with {overrides}" if overrides else "") else 1


def show_report(console: Any, rows: Sequence[dict], name: str, targets: Sequence[str], detail: str = "") -> bool:
    """Print one submission's report (CompileReport, or that it launched no Triton kernel) to a rich
    console; whether every kernel compiled for every target. `detail` ends the title."""
    if not rows:
        from rich.text import Text

        console.print(Text(f"{name} launched no Triton kernel on the task's small cases: nothing to compile."))
        return True
    console.print(CompileReport(rows, name, targets, detail))
    return all(row["status"] == "compiled" for row in rows)


if __name__ == "__main__":
    sys.exit(main())
