"""Timings audited from outside the submission's process: the vendor profiler's kernel times.

The worker measures its own calls, and a submission can patch anything in its process (the timer,
the channel, the copy of its output), so in leaderboard mode on a GPU the parent checks the timed
medians against a witness the submission does not control: after timing, a second sandboxed worker
runs under Nsight Compute (`ncu`, which profiles every kernel the process launches, on every
stream), makes a warm-up call and AUDIT_CALLS calls per benchmark case on fresh inputs (every
output checked), and the profiler's GPU time per call is compared with the timed median. A median
more than TOLERANCE below it rejects the submission with both numbers.

Which kernels belong to which call is not taken from the worker (it could label its work as
warm-up): before each call, and once after the last, the parent has the marker process
(harness/worker/marker.py) launch one kernel and waits for it. The profiler runs kernels one at a
time and numbers them in order, so the worker's kernels between two marks are that call's, and
the inputs of a call are written only after its mark. Kernels after the last mark count for the
last call; kernels before the first (imports) and in warm-ups (compilation, autotuning) do not
count. Every audited call must show GPU kernels of its own.

The profiler runs inside the worker's sandbox (across the sandbox's PID namespace it costs ~110 ms
per kernel instead of ~9 ms; BENCHMARKS.md session 7), so the worker can see it. It can kill it or
the marker (marks or the report go missing, the exit is not clean: the audit fails), or add lines
to the report, which reaches the parent through a pipe, never as a file (`kernel_times` reads it
strictly: one header, kernel IDs 0, 1, 2, ... each once, finite durations, no profiler error;
anything else fails the audit, and extra kernels only add GPU time). Patching the memory of the
profiler, of the marker, or of the profiler's library injected into the worker's own process
stays beyond this check (README, threat model).
"""

from __future__ import annotations

import csv
import io
import math
import os
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
MARK_TIMEOUT = 60.0  # seconds the marker may take for one mark (its kernel runs under the profiler)


def find_ncu() -> Optional[str]:
    for candidate in (shutil.which("ncu"), "/usr/local/cuda/bin/ncu"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def ncu_command(exe: str) -> list[str]:
    """Nsight Compute writing its report (CSV, one row per kernel) to its standard output."""
    return [exe, "--target-processes", "all", "--metrics", "gpu__time_duration.sum", "--clock-control", "none",
            "--cache-control", "all", "--csv", "--page", "raw", "--print-units", "base"]


class ReportError(ValueError):
    """A profiler report that is not what the profiler writes (one line, for the audit's reason)."""


def kernel_times(report_text: str) -> list[tuple[str, str, float]]:
    """(launching process id, kernel name, duration in seconds) for every kernel of an
    `ncu --csv --page raw` report, in the order the profiler ran them. Strict, since the profiled worker can add
    lines to it: ReportError for a profiler error, a second header, a line that is no row of the
    header's width, kernel IDs other than 0, 1, 2, ..., or a duration that is no finite number >= 0."""
    lines = []
    for line in report_text.splitlines():
        if line.startswith("==ERROR=="):
            raise ReportError(f"the profiler reported an error: {line[9:].strip()[:200]}")
        if line and not line.startswith("=="):  # ncu's own messages
            lines.append(line)
    if not lines:
        return []
    try:
        rows = list(csv.reader(io.StringIO("\n".join(lines)), strict=True))
    except csv.Error as exc:
        raise ReportError(f"unreadable profiler report ({exc})") from None
    header, body = rows[0], rows[1:]
    col = {name: i for i, name in enumerate(header)}
    if not header or header[0] != "ID" or not {"gpu__time_duration.sum", "Kernel Name", "Process ID"} <= set(col):
        raise ReportError("the profiler report does not start with its header")
    time_col, name_col, pid_col = col["gpu__time_duration.sum"], col["Kernel Name"], col["Process ID"]
    if body and not body[0][0]:  # the units row
        body = body[1:]
    out = []
    for number, row in enumerate(body):
        if len(row) != len(header) or row[0] != str(number):
            raise ReportError(f"the profiler report has a line that is not its kernel {number}")
        try:
            duration = float(row[time_col].replace(",", "")) * 1e-9  # --print-units base: nanoseconds
        except ValueError:
            raise ReportError(f"the profiler report's kernel {number} has no duration") from None
        if not math.isfinite(duration) or duration < 0:
            raise ReportError(f"the profiler report's kernel {number} has a duration of {row[time_col][:20]}")
        out.append((row[pid_col], row[name_col], duration))
    return out


def per_case(kernels: list[tuple[str, str, float]], marker_pid: str,
             plan: list[tuple[int, int]]) -> tuple[dict[int, float], dict[int, set[int]]]:
    """(GPU seconds per audited case, the audited calls per case that showed kernels of their own)
    from a report's kernels, the marker's process id, and what followed each of its kernels, in
    order: (case index, call), call -1 for a warm-up (or the imports). ReportError unless the
    marker's kernels are exactly those of the plan."""
    marks = sum(1 for pid, _, _ in kernels if pid == marker_pid)
    if marks != len(plan):
        raise ReportError(f"the profiler saw {marks} of the audit's {len(plan)} marks")
    totals: dict[int, float] = {}
    calls: dict[int, set[int]] = {}
    seen = -1
    for pid, _, seconds in kernels:
        if pid == marker_pid:
            seen += 1
            continue
        if seen < 0:  # before the first mark: imports
            continue
        case, call = plan[seen]
        if call < 0:  # a warm-up
            continue
        totals[case] = totals.get(case, 0.0) + seconds
        calls.setdefault(case, set()).add(call)
    return totals, calls


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
    """Where the parent keeps the profiler's report: beside the worker's scratch folder, never
    inside it (the worker can write there)."""
    return scratch.with_name(scratch.name + ".audit-ncu.csv")


def start(path: Path, ctx: "RunContext", scratch: Path) -> Optional["Sandbox"]:
    """Start the audit's worker and its marker under the profiler (they import while the timed calls
    run), or None where no audit applies."""
    from harness.launch import log_path
    from harness.sandbox import Sandbox

    if why_not(ctx):
        return None
    return Sandbox(path, ctx.device, log_path(ctx.log_dir, path).with_suffix(".audit.log"),
                   ctx.problem.spec.timeouts.startup, sandbox=ctx.sandbox, private=ctx.private,
                   wrapper=ncu_command(find_ncu()), report=_report_path(scratch), scratch=scratch, marker=True)


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
    plan = [(-1, -1)]  # the marker's kernel before it said ready: imports follow (not counted)
    failure = _profiled_calls(ctx, box, [cases[c.index] for c in timed], clock, plan)
    seen = failure or _read(box, plan)
    if isinstance(seen, str):
        result.audit, result.ok = seen, False
        result.error = result.error or seen
        return
    _judge(result, cases, *seen)


def _read(box: "Sandbox", plan: list[tuple[int, int]]):
    """Each case's GPU seconds and calls seen, from the finished profiler's report; or why not (a str)."""
    worker = box.worker
    code = worker.proc.returncode
    if code != 0:
        return f"audit failed: the profiled worker did not exit cleanly ({worker.how_it_ended()[0]})"
    if worker.report is None or worker.report.overflowed:
        return "audit failed: the profiler's report is larger than the harness keeps"
    try:
        text = worker.report.path.read_text(errors="replace")
        return per_case(kernel_times(text), box.marker_pid, plan)
    except OSError as exc:
        return f"audit failed: no profiler report ({exc.strerror})"
    except ReportError as exc:
        return f"audit failed: {exc}"


def _profiled_calls(ctx: "RunContext", box: "Sandbox", cases: list, clock: "PhaseClock",
                    plan: list[tuple[int, int]]) -> Optional[str]:
    """A warm-up and AUDIT_CALLS checked calls on fresh inputs per case, in the profiled worker, each
    after a mark (appended to `plan`: case index, call or -1 for the warm-up); the first failure,
    or None. The worker is closed at the end (the profiler then writes its report)."""
    from harness.engine import _Inputs
    from harness.sandbox import WorkerFailure

    try:
        clock.timed("start", box.wait_ready)
        for case in cases:
            inputs = _Inputs(ctx, case, clock)
            inputs.share(box)
            seeds = ctx.timed_seeds(case)
            for call in range(-1, AUDIT_CALLS):
                clock.timed("marks", box.mark, MARK_TIMEOUT)
                plan.append((case.index, call))
                if call >= 0:  # after the mark: nothing of this call's can come before it
                    inputs.refill(seeds() ^ 0x5A5A5A5A)  # not the timed calls' inputs
                verdict, _ = inputs.call(False, time.monotonic() + ctx.problem.spec.timeouts.benchmark_case)
                if not verdict.ok:
                    return f"audit call on {case.name}: {verdict.reason}"
        clock.timed("marks", box.mark, MARK_TIMEOUT)  # what follows the last call counts for it
        plan.append(plan[-1])
    except WorkerFailure as exc:
        return f"audit run: {exc.kind}: {exc}"
    finally:  # the profiler writes its report after the worker exits
        clock.timed("report", box.worker.close, grace=120)
    return None


def _judge(result: "SubmissionResult", cases: dict, totals: dict[int, float], calls: dict[int, set[int]]) -> None:
    """Compare each timed median with the profiler's GPU time per call; fail the cases below it by
    more than TOLERANCE, and (failing closed) those with an audited call the profiler saw no
    kernel of."""
    from harness.engine import _result

    worst, missing = 0.0, 0
    for i, c in enumerate(result.cases):
        if c.kind != "benchmark" or not c.ok or c.device is None:
            continue
        audit_s = totals.get(c.index, 0.0) / AUDIT_CALLS
        c.audit_s = audit_s
        stats = dict(device=c.device, host=c.host, tail=c.tail, bytes=c.bytes, audit_s=audit_s)
        seen = len(calls.get(c.index, ()))
        if seen < AUDIT_CALLS:
            missing += 1
            reason = (f"the profiler saw GPU kernels in {seen} of this case's {AUDIT_CALLS} audit calls "
                      "(a GPU submission must compute on the GPU)")
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
