"""Timings audited from outside the submission's process: the vendor profiler's kernel times.

The worker measures its own calls, and a submission can patch anything in its process (the timer,
the channel, the copy of its output), so in leaderboard mode on a GPU the parent checks the timed
medians against a witness the submission does not control: after timing, a second sandboxed worker
runs under Nsight Compute (`ncu`, which profiles every kernel the process launches, on every
stream), makes a warm-up call and AUDIT_CALLS calls per benchmark case on fresh inputs (every
output checked), and the profiler's GPU time per call is compared with the timed median. A median
more than TOLERANCE below it rejects the submission with both numbers.

Kernels are attributed to calls by an NVTX range the worker pushes around each call
(MARK/<case>/<call>, MARK/warmup/<case>); kernels launched outside any range after the first call
(work started between calls, or left running after one) count for the case whose range came
last, so neither hides them; every audited call must show kernels of its own. The ranges come
from the worker's process, so a submission that rewrites them can label its work as warm-up:
that stays out of reach of this check (README, threat model; a witness of the order of calls from
outside the worker is the way to close it: a second process under ncu was measured, and ncu
reports each process's kernels apart, BENCHMARKS.md).

The profiler runs inside the worker's sandbox: across the sandbox's PID namespace it costs ~110 ms
per kernel instead of ~10 ms (BENCHMARKS.md). The worker can see it, kill it (the report
is then incomplete and the exit unclean: the audit fails) or add lines to its report, which reaches
the parent through a pipe, never as a file: `kernel_times` reads it strictly (one header, kernel
IDs 0, 1, 2, ... each once, finite durations, no profiler error; anything else fails the audit).
Rows it appends after the profiler's own add GPU time, so they cannot lower a case's total; with
labels of audited calls they can satisfy "every call shows kernels", as relabelling can (above).
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
import shutil
import stat
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from harness.parent.launch import OPEN_FOLDER

if TYPE_CHECKING:
    from harness.config import RunContext
    from harness.parent.case import PhaseClock
    from harness.parent.launch import WorkerProcess
    from harness.results import SubmissionResult
    from harness.parent.sandbox import Sandbox

AUDIT_CALLS = 3
# A timed median may be this much below the profiler's GPU time per call. Honest triton_bf16 on
# the H200: timed / profiled 0.99-1.07 over the 8 benchmark cases (BENCHMARKS.md).
TOLERANCE = 0.10
MARK = "mla-eval-call"    # NVTX range names: MARK/<case index>/<call> (audited), MARK/warmup/<case index>


def find_ncu() -> Optional[str]:
    for candidate in (shutil.which("ncu"), "/usr/local/cuda/bin/ncu"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def ncu_command(exe: str) -> list[str]:
    """Nsight Compute writing its report (CSV, one row per kernel) to its standard output."""
    return [exe, "--target-processes", "all", "--metrics", "gpu__time_duration.sum", "--clock-control", "none",
            "--cache-control", "all", "--nvtx", "--print-nvtx-rename", "none", "--csv", "--page", "raw",
            "--print-units", "base"]


class ReportError(ValueError):
    """A profiler report that is not what the profiler writes (one line, for the audit's reason)."""


def kernel_times(report_text: str) -> list[tuple[str, str, float]]:
    """(kernel name, its NVTX range stack, duration in seconds) for every kernel of an
    `ncu --csv --page raw --nvtx` report, in launch order. Strict, since the profiled worker can add
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
    if not header or header[0] != "ID" or not {"gpu__time_duration.sum", "Kernel Name"} <= set(col):
        raise ReportError("the profiler report does not start with its header")
    time_col, name_col = col["gpu__time_duration.sum"], col["Kernel Name"]
    # "thread Domain:Push/Pop_Range:..." (and the Start/Stop one): each kernel's NVTX ranges
    nvtx_cols = [i for name, i in col.items() if "_Range:" in name]
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
        out.append((row[name_col], " ".join(row[i] for i in nvtx_cols if row[i]), duration))
    return out


def per_case(kernels: list[tuple[str, str, float]]) -> tuple[dict[int, float], dict[int, set[int]]]:
    """(GPU seconds per audited case, the audited calls per case that showed kernels) from a
    report's kernels: inside MARK/<case>/<call> ranges, plus kernels outside any range once a
    case's calls began (they count for the case whose range came last, warm-up included, so work
    done between calls cannot hide). Kernels inside warm-up ranges (compilation, autotuning) and
    before the first range (imports) do not count."""
    totals: dict[int, float] = {}
    calls: dict[int, set[int]] = {}
    current: Optional[int] = None
    for _, stack, seconds in kernels:
        warmup = re.search(rf"{MARK}/warmup/(\d+)", stack)
        audited = re.search(rf"{MARK}/(\d+)/(\d+)", stack)
        if warmup:
            current = int(warmup.group(1))
            continue
        if audited:
            current = int(audited.group(1))
            calls.setdefault(current, set()).add(int(audited.group(2)))
        if current is not None:
            totals[current] = totals.get(current, 0.0) + seconds
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


def discard_report(scratch: Path) -> None:
    """Remove what an audit worker that was never used (or whose report was kept) left beside `scratch`."""
    _report_path(scratch).unlink(missing_ok=True)


def start(path: Path, ctx: "RunContext") -> Optional["Sandbox"]:
    """Start the audit's worker under the profiler, or None where no audit applies. It imports while
    the tests run; the engine waits for it to be idle before the first timed call. Its scratch is
    its own (removed when it closes): no file the timed worker wrote reaches it but the compiled
    kernels `share_kernels` copies, and the two share no folder to work together through."""
    from harness.parent.launch import log_path
    from harness.parent.sandbox import Sandbox

    if why_not(ctx):
        return None
    scratch = Path(tempfile.mkdtemp(prefix="mla-eval-audit-"))
    try:
        box = Sandbox(path, ctx.device, log_path(ctx.log_dir, path).with_suffix(".audit.log"),
                      ctx.problem.spec.timeouts.startup, sandbox=ctx.sandbox, private=ctx.private,
                      wrapper=ncu_command(find_ncu()), report=_report_path(scratch), scratch=scratch,
                      shared=ctx.shared)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)  # (empty: no worker ran in it)
        raise
    box.worker.owns_scratch = True
    return box


SHARE_BYTES = 512 * 2**20   # what share_kernels copies at most: a Triton cache is a few MiB ...
SHARE_FILES = 20_000        # ... in a few hundred files and folders ...
SHARE_DEPTH = 8             # ... two folders deep ...
SHARE_SECONDS = 10.0        # ... in well under a second


class _ShareLimit(Exception):
    pass


def share_kernels(timed: "WorkerProcess", box: "Sandbox") -> None:
    """Copy the timed worker's compiled Triton kernels into the audit worker's cache, so the audit
    does not compile them again (the same submission's own kernels: nothing it could not run there
    anyway). Both workers are running (a sandboxed worker's folder is a tmpfs that ends with it),
    and both folders are the submission's to write: only folders and regular files are copied,
    through descriptors, following no link on either side and overwriting nothing, up to
    SHARE_BYTES / SHARE_FILES (files and folders) / SHARE_DEPTH / SHARE_SECONDS; past those, or on
    any error, the copy stops there (the audit compiles what is missing)."""
    opened: list[int] = []
    try:
        work = timed.open_work_folder()
        opened.append(work)
        source = os.open("triton-cache", OPEN_FOLDER, dir_fd=work)
        opened.append(source)
        scratch = box.worker.open_work_folder()
        opened.append(scratch)
        try:
            os.mkdir("triton-cache", 0o755, dir_fd=scratch)
        except FileExistsError:
            pass
        target = os.open("triton-cache", OPEN_FOLDER, dir_fd=scratch)
        opened.append(target)
        _copy_folder(source, target, [SHARE_BYTES, SHARE_FILES, time.monotonic() + SHARE_SECONDS], 0)
    except (OSError, _ShareLimit):
        pass
    finally:
        for fd in opened:
            os.close(fd)


def _spend(left: list) -> None:
    """One more file or folder to copy: within SHARE_FILES and SHARE_SECONDS, else _ShareLimit."""
    left[1] -= 1
    if left[1] < 0 or time.monotonic() > left[2]:
        raise _ShareLimit


def _copy_folder(source: int, target: int, left: list, depth: int) -> None:
    """Folders and regular files of the folder open at `source` into the one open at `target`;
    `left`: [bytes, files and folders, the monotonic deadline]."""
    if depth >= SHARE_DEPTH:
        raise _ShareLimit
    for name in os.listdir(source):
        info = os.stat(name, dir_fd=source, follow_symlinks=False)
        if stat.S_ISDIR(info.st_mode):
            _spend(left)
            try:
                os.mkdir(name, 0o755, dir_fd=target)
            except FileExistsError:
                pass
            inner_source = os.open(name, OPEN_FOLDER, dir_fd=source)
            try:
                inner_target = os.open(name, OPEN_FOLDER, dir_fd=target)
                try:
                    _copy_folder(inner_source, inner_target, left, depth + 1)
                finally:
                    os.close(inner_target)
            finally:
                os.close(inner_source)
        elif stat.S_ISREG(info.st_mode):
            _copy_file(name, source, target, left)


def _copy_file(name: str, source: int, target: int, left: list) -> None:
    _spend(left)
    reader = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=source)
    try:
        if not stat.S_ISREG(os.fstat(reader).st_mode):  # replaced since it was listed
            return
        try:
            writer = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=target)
        except FileExistsError:
            return
        try:
            while chunk := os.read(reader, 1 << 20):
                left[0] -= len(chunk)
                if left[0] < 0:
                    raise _ShareLimit
                view = memoryview(chunk)
                while view:
                    view = view[os.write(writer, view):]
        finally:
            os.close(writer)
    finally:
        os.close(reader)


def audit_submission(path: Path, ctx: "RunContext", result: "SubmissionResult", box: Optional["Sandbox"]) -> None:
    """Audit `result`'s timed benchmark cases with the worker `start` gave; mark failing cases and
    set `result.audit`. Its wall time goes to `result.phases` as "audit ..." entries."""
    from harness.parent.case import PhaseClock

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
    seen = failure or _read(box)
    if isinstance(seen, str):
        result.audit, result.ok = seen, False
        result.error = result.error or seen
        return
    _judge(result, cases, *seen)


def _read(box: "Sandbox"):
    """Each case's GPU seconds and calls seen, from the finished profiler's report; or why not (a str)."""
    worker = box.worker
    code = worker.proc.returncode
    if code != 0:
        return f"audit failed: the profiled worker did not exit cleanly ({worker.how_it_ended()[0]})"
    if worker.report is None:
        return "audit failed: the profiled worker has no report"
    if worker.report.overflowed:
        return "audit failed: the profiler's report is larger than the harness keeps"
    if not worker.report.complete:
        return "audit failed: the profiler's report did not end (its output stayed open)"
    try:
        text = worker.report.path.read_text(errors="replace")
        return per_case(kernel_times(text))
    except OSError as exc:
        return f"audit failed: no profiler report ({exc.strerror})"
    except ReportError as exc:
        return f"audit failed: {exc}"


def _profiled_calls(ctx: "RunContext", box: "Sandbox", cases: list, clock: "PhaseClock") -> Optional[str]:
    """A warm-up and AUDIT_CALLS checked calls on fresh inputs per case, in the profiled worker;
    the first failure, or None. The worker is closed at the end (the profiler then writes its report)."""
    from harness.parent.case import CaseInputs
    from harness.parent.sandbox import WorkerFailure

    try:
        clock.timed("start", box.wait_ready)
        for case in cases:
            inputs = CaseInputs(ctx, case, clock)
            inputs.share(box)
            seeds = ctx.timed_seeds(case)
            for call in range(-1, AUDIT_CALLS):
                if call >= 0:
                    inputs.refill(seeds() ^ 0x5A5A5A5A)  # not the timed calls' inputs
                mark = f"{MARK}/{case.index}/{call}" if call >= 0 else f"{MARK}/warmup/{case.index}"
                verdict, _ = inputs.call(False, time.monotonic() + ctx.problem.spec.timeouts.benchmark_case, mark)
                if not verdict.ok:
                    return f"audit call on {case.name}: {verdict.reason}"
    except WorkerFailure as exc:
        return f"audit run: {exc.kind}: {exc}"
    finally:  # the profiler writes its report after the worker exits
        clock.timed("report", box.worker.close, grace=120)
    return None


def _judge(result: "SubmissionResult", cases: dict, totals: dict[int, float], calls: dict[int, set[int]]) -> None:
    """Compare each timed median with the profiler's GPU time per call; fail the cases below it by
    more than TOLERANCE, and (failing closed) those with an audited call the profiler saw no
    kernel of."""
    from harness.parent.case import case_result

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
        result.cases[i] = case_result(cases[c.index], False, reason, **stats)
        result.ok = False
    result.audit = (f"audit failed: no kernels seen in {missing} case(s)" if missing else
                    f"audited by ncu: {AUDIT_CALLS} calls per case, timed medians at most {max(worst, 0):.0%} below")
