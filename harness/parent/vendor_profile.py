"""One timed call of one case under the vendor's profiler: Nsight Compute (NVIDIA) or rocprof (AMD).

`run_vendor_profiler` starts `python -m harness.worker.profiled ...` under the tool. That child
prepares the case, warms the submission up (compilation stays out of the report), then makes
exactly one call inside a profiler range (`cudaProfilerStart/Stop`, which `ncu --profile-from-start
off` honours). This is a diagnostic: no verdict or ranking comes from it, so the submission runs
in the profiled process itself, inside the same OS sandbox as a worker, with the profiler (which
writes its report into the sandbox's scratch folder; the parent moves it out afterwards).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Sequence



class ProfilerMissing(RuntimeError):
    pass


# The rows of Nsight Compute's summary worth reading first (the full report stays in the file).
KEY_METRICS = ("Duration", "DRAM Throughput", "Memory Throughput", "Compute (SM) Throughput",
               "Registers Per Thread", "Achieved Occupancy", "Theoretical Occupancy", "Grid Size",
               "Block Size", "Dynamic Shared Memory Per Block")


def key_rows(summary: str) -> str:
    """Kernel header lines and the KEY_METRICS rows of `ncu --print-summary per-kernel` output."""
    keep = []
    for line in summary.splitlines():
        stripped = line.strip()
        if ")x(" in line and ("Device" in line or "Invocations" in line):  # a kernel's header
            keep.append(stripped)
        elif any(stripped.startswith(name + " ") for name in KEY_METRICS):
            keep.append("    " + " ".join(stripped.split()))
    return "\n".join(keep) if keep else summary


def tool_command(tool: str, vendor: str, report_base: Path) -> list[str]:
    """The profiler's command line up to (not including) the program to run."""
    if tool == "ncu":
        if vendor != "nvidia":
            raise ProfilerMissing(f"--ncu profiles NVIDIA GPUs; this device is {vendor} (use --rocprof on AMD)")
        exe = shutil.which("ncu")
        if exe is None:
            raise ProfilerMissing("--ncu: NVIDIA Nsight Compute (ncu) is not installed or not on PATH")
        # Leave the clocks as they are (shared machines); profile only the range around one call.
        return [exe, "--clock-control", "none", "--profile-from-start", "off", "--target-processes", "all",
                "--force-overwrite", "--export", str(report_base)]
    if tool == "rocprof":
        if vendor != "amd":
            raise ProfilerMissing(f"--rocprof profiles AMD GPUs; this device is {vendor} (use --ncu on NVIDIA)")
        exe = shutil.which("rocprofv3")
        if exe is not None:
            return [exe, "--kernel-trace", "--stats", "--output-directory", str(report_base), "--"]
        exe = shutil.which("rocprof")
        if exe is None:
            raise ProfilerMissing("--rocprof: neither rocprofv3 nor rocprof is installed or on PATH")
        return [exe, "--stats", "-o", str(report_base) + ".csv"]
    raise ValueError(tool)


def run_vendor_profiler(tool: str, vendor: str, task: Path, submission: Path, case_index: int,
                        out_dir: Path, sandbox: str = "auto", private: Sequence[Path] = ()) -> tuple[Path, str]:
    """Profile one call; return (where the report is, the tool's summary text)."""
    from harness.worker.channel import printable_line
    from harness.parent.launch import (LOG_LIMIT, TMPFS_LIMIT, bwrap_command, child_env, child_view, find_bwrap, run_captured,
                                use_sandbox, worker_folder)

    out_dir.mkdir(parents=True, exist_ok=True)
    base = out_dir / f"{submission.stem}.case{case_index}"
    child = [sys.executable, "-m", "harness.worker.profiled", "--task", str(Path(task).resolve()), "--submission",
             str(Path(submission).resolve()), "--case", str(case_index)]  # (its working folder is its scratch)
    sandboxed = use_sandbox(sandbox)
    with worker_folder("mla-eval-profile-") as scratch, worker_folder("mla-eval-profile-out-") as outside:
        inside = Path("/tmp/work") if sandboxed else Path(scratch)  # where the scratch folder is for the profiler
        command = tool_command(tool, vendor, inside / base.name) + child
        box = None
        if sandboxed:  # the profiler too: across the sandbox's PID namespace ncu is ~10x slower per kernel
            box = bwrap_command(find_bwrap(), submission, private, scratch=Path(scratch),
                                tools=command[:1], **child_view(Path(__file__).parents[1] / "worker" / "profiled.py", task))
            command = box + command
        code, out, _, err = run_captured(command, child_env(), Path(scratch), Path(outside), None, LOG_LIMIT,
                                         file_limit=TMPFS_LIMIT, box=box)  # (a profiler's report may be large)
        stdout = out.decode("utf-8", "replace")
        for made in Path(scratch).glob(base.name + "*"):  # the report (a file, or rocprofv3's folder)
            if made.is_symlink():
                continue
            target = out_dir / made.name
            if target.is_dir():
                shutil.rmtree(target)
            shutil.move(str(made), str(target))
    if code != 0:
        tail = [printable_line(line) for line in (err or stdout).strip().splitlines()[-5:]]  # (the submission's text)
        raise RuntimeError(f"{tool} failed (exit {code}): " + " | ".join(tail))
    if tool == "ncu":
        report = base.with_suffix(base.suffix + ".ncu-rep")
        summary = subprocess.run([shutil.which("ncu"), "--import", str(report), "--print-summary", "per-kernel"],
                                 capture_output=True, text=True).stdout
        return report, key_rows(summary)
    return base, stdout
