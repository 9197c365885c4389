"""Timings audited from outside the submission's process: the vendor profiler's kernel times.

The worker measures its own calls, and a submission can patch anything in its process (the timer,
the channel, the copy of its output), so in leaderboard mode on a GPU the parent checks the timed
medians against a witness the submission does not control: after timing, a second sandboxed worker
runs under Nsight Compute (`ncu`, which profiles every kernel the process launches, on every
stream), makes a warm-up call and AUDIT_CALLS calls per benchmark case on fresh inputs (every
output checked), and the profiler's GPU time per call is compared with the timed median. A median
more than TOLERANCE below it rejects the submission with both numbers.

Kernels are attributed to calls by an NVTX range the worker pushes around each call; kernels
launched outside any range after the first audited call (work started between calls, or left
running after one) count for the case whose range came last, so neither hides them.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from harness.engine import PhaseClock, RunContext
    from harness.results import SubmissionResult
    from harness.sandbox import Sandbox

AUDIT_CALLS = 3
# A timed median may be this much below the profiler's GPU time per call. Honest triton_bf16 on
# the H200: timed / profiled 0.99-1.07 over the 8 benchmark cases (BENCHMARKS.md).
TOLERANCE = 0.10
MARK = "mla-eval-call"    # NVTX range names: MARK/<case index> (audited), MARK/warmup/<case index>


def find_ncu() -> Optional[str]:
    for candidate in (shutil.which("ncu"), "/usr/local/cuda/bin/ncu"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def ncu_command(exe: str, report: Path) -> list[str]:
    return [exe, "--target-processes", "all", "--metrics", "gpu__time_duration.sum", "--clock-control", "none",
            "--cache-control", "all", "--nvtx", "--print-nvtx-rename", "none", "--csv", "--page", "raw",
            "--print-units", "base", "--log-file", str(report)]


def kernel_times(report_text: str) -> list[tuple[str, str, float]]:
    """(kernel name, its NVTX range stack, duration in seconds) for every kernel of an
    `ncu --csv --page raw --nvtx` log, in launch order."""
    lines = [line for line in report_text.splitlines() if line and not line.startswith("==")]  # ncu's own messages
    if not lines:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    header, body = rows[0], rows[1:]
    col = {name: i for i, name in enumerate(header)}
    time_col = col.get("gpu__time_duration.sum")
    name_col = col.get("Kernel Name")
    # "thread Domain:Push/Pop_Range:..." (and the Start/Stop one): each kernel's NVTX ranges
    nvtx_cols = [i for name, i in col.items() if "_Range:" in name]
    out = []
    for row in body:
        if time_col is None or len(row) <= time_col:
            continue
        try:
            duration = float(row[time_col].replace(",", ""))
        except ValueError:  # the units row
            continue
        unit_scale = 1e-9  # --print-units base: nanoseconds
        stack = " ".join(row[i] for i in nvtx_cols if i < len(row) and row[i])
        out.append((row[name_col] if name_col is not None else "?", stack, duration * unit_scale))
    return out


def per_case(kernels: list[tuple[str, str, float]]) -> dict[int, float]:
    """Total kernel seconds per audited case index: inside MARK/<index> ranges, plus kernels outside
    any range once a case's calls began (they count for the case whose range came last, warm-up
    included, so work done between calls cannot hide). Kernels inside warm-up ranges (compilation,
    autotuning) and before the first range (imports) do not count."""
    totals: dict[int, float] = {}
    current: Optional[int] = None
    for _, stack, seconds in kernels:
        warmup = re.search(rf"{MARK}/warmup/(\d+)", stack)
        audited = re.search(rf"{MARK}/(\d+)", stack)
        if warmup:
            current = int(warmup.group(1))
            continue
        if audited:
            current = int(audited.group(1))
        if current is not None:
            totals[current] = totals.get(current, 0.0) + seconds
    return totals


def why_not(ctx: "RunContext") -> Optional[str]:
    """Why this run's timings cannot be audited (shown and stored), or None."""
    if not ctx.audit:
        return "not audited (--no-audit)"
    if not ctx.device.is_gpu:
        return "not audited (CPU: times are the parent's own clock)"
    if ctx.device.vendor != "nvidia":
        return f"not audited (no profiler audit for {ctx.device.vendor} GPUs yet)"
    if find_ncu() is None:
        return "not audited (Nsight Compute, ncu, not found)"
    return None


def _report_path(scratch: Path) -> Path:
    """Where the profiler writes its report: beside the worker's scratch folder, never inside it
    (the worker can write there, and could plant a report of its own)."""
    return scratch.with_name(scratch.name + ".audit-ncu.csv")


def start(path: Path, ctx: "RunContext", scratch: Path) -> Optional["Sandbox"]:
    """Start the audit's worker under the profiler (it imports while the timed calls run), or None
    where no audit applies."""
    from harness.launch import log_path
    from harness.sandbox import Sandbox

    if why_not(ctx):
        return None
    report = _report_path(scratch)
    return Sandbox(path, ctx.device, log_path(ctx.log_dir, path).with_suffix(".audit.log"),
                   ctx.problem.spec.timeouts.startup, sandbox=ctx.sandbox, private=ctx.private,
                   wrapper=ncu_command(find_ncu(), report), share_net=True, scratch=scratch)


def audit_submission(path: Path, ctx: "RunContext", result: "SubmissionResult", box: Optional["Sandbox"]) -> None:
    """Audit `result`'s timed benchmark cases with the worker `start` gave; mark failing cases and
    set `result.audit`. Its wall time goes to `result.phases` as "audit ..." entries."""
    from harness.engine import PhaseClock

    phases: dict[str, float] = {}
    try:
        _audit(ctx, result, box, PhaseClock(phases))
    finally:
        for name, seconds in phases.items():
            result.phases[f"audit {name}"] = seconds
        report = _report_path(box.worker.scratch) if box is not None else None
        if report is not None and report.exists():  # kept beside the logs, for review
            shutil.move(report, Path(result.log).with_suffix(".audit.csv"))


def _audit(ctx: "RunContext", result: "SubmissionResult", box: Optional["Sandbox"], clock: "PhaseClock") -> None:
    timed = [c for c in result.cases if c.kind == "benchmark" and c.ok and c.device is not None]
    if not timed or box is None:
        result.audit = why_not(ctx) or "not audited (no timed case)"
        if box is not None:
            box.close()
        return
    cases = {c.index: c for c in ctx.problem.spec.cases("benchmark", ctx.small)}
    failure = _profiled_calls(ctx, box, [cases[c.index] for c in timed], clock)
    totals: dict[int, float] = {}
    if failure is None:
        try:
            totals = per_case(kernel_times(_report_path(box.worker.scratch).read_text(errors="replace")))
        except OSError as exc:
            failure = f"audit failed: no profiler report ({exc.strerror})"
    if failure:
        result.audit, result.ok = failure, False
        result.error = result.error or failure
        return
    _judge(result, cases, totals)


def _profiled_calls(ctx: "RunContext", box: "Sandbox", cases: list, clock: "PhaseClock") -> Optional[str]:
    """A warm-up and AUDIT_CALLS checked calls on fresh inputs per case, in the profiled worker;
    the first failure, or None. The worker is closed at the end (the profiler then writes its report)."""
    from harness.engine import _Inputs
    from harness.sandbox import WorkerFailure

    try:
        clock.timed("start", box.wait_ready)
        for case in cases:
            inputs = _Inputs(ctx, case, clock)
            inputs.share(box)
            seeds = ctx.timed_seeds(case)
            for call in range(1 + AUDIT_CALLS):
                if call:
                    inputs.refill(seeds() ^ 0x5A5A5A5A)  # not the timed calls' inputs
                mark = f"{MARK}/{case.index}" if call else f"{MARK}/warmup/{case.index}"
                verdict, _ = inputs.call(False, time.monotonic() + ctx.problem.spec.timeouts.benchmark_case, mark)
                if not verdict.ok:
                    return f"audit call on {case.name}: {verdict.reason}"
    except WorkerFailure as exc:
        return f"audit run: {exc.kind}: {exc}"
    finally:  # the profiler writes its report after the worker exits
        clock.timed("report", box.worker.close, grace=120)
    return None


def _judge(result: "SubmissionResult", cases: dict, totals: dict[int, float]) -> None:
    """Compare each timed median with the profiler's GPU time per call; fail the cases below it by
    more than TOLERANCE, and (failing closed) those whose calls the profiler did not see."""
    from harness.engine import _result

    worst, missing = 0.0, 0
    for i, c in enumerate(result.cases):
        if c.kind != "benchmark" or not c.ok or c.device is None:
            continue
        audit_s = totals.get(c.index, 0.0) / AUDIT_CALLS
        c.audit_s = audit_s
        stats = dict(device=c.device, host=c.host, tail=c.tail, bytes=c.bytes, audit_s=audit_s)
        if audit_s <= 0:
            missing += 1
            reason = "the profiler saw no GPU kernels in this case's audit calls (a GPU submission must compute on the GPU)"
        elif c.device.median < audit_s * (1 - TOLERANCE):
            reason = (f"timed median {c.device.median * 1e6:.1f} µs is below the profiler's {audit_s * 1e6:.1f} µs "
                      f"of GPU work per call (audit, tolerance {TOLERANCE:.0%})")
        else:
            worst = max(worst, 1 - c.device.median / audit_s)
            continue
        result.cases[i] = _result(cases[c.index], False, reason, **stats)
        result.ok = False
    result.audit = (f"audit failed: no kernels seen in {missing} case(s)" if missing else
                    f"audited by ncu: {AUDIT_CALLS} calls per case, timed medians at most {max(worst, 0):.0%} below")
