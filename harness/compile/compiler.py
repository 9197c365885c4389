"""Recorded launches compiled per target (sandboxed, no interpreter): each launch rebuilt exactly as a
launch there would bind it (Triton's own argument binder and option parser for that target's
backend), compiled offline by triton.compile, and the compiler's numbers read into a report row
(`_row`; report.py's ROW_FIELDS): registers, spills, LDS / shared memory, occupancy, the matrix
instructions, the named traps. `apply_overrides` applies --set / --option to the launches before."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import tempfile
from typing import Any, Iterable, Optional, Sequence

from harness.compile.assembly import (amd_occupancy, compile_error_line, fp8_traps, matrix_instructions,
                                      nvidia_local_bytes, parse_amdgcn, parse_resource_usage, uses_dot)
from harness.compile.record import _constant
from harness.compile.targets import (AMD_LIMITS, AMD_OPTIONS_ON_NVIDIA, KPACK_ON_GFX950, LDS_BEYOND_TARGET, NEED_PTXAS,
                                     NO_MATRIX, NVIDIA_LOCAL, NVIDIA_OPTIONS_ON_AMD, NVIDIA_SHARED_BYTES, SPILLS,
                                     SPILLS_IN_REGISTERS, WAVES_NOT_MET, XF32_MFMA, parse_target)


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
