"""The profiler audit (harness/audit.py): its strict reading of Nsight Compute's CSV (`--csv --page
raw`, header and cells as the H200's ncu writes them, BENCHMARKS.md), the attribution of kernels
to calls by the marker process's kernels, the judgement, and the plumbing of the profiled worker
(marker, report pipe) on the CPU with a stand-in profiler. The audit itself runs on the GPU
(tools/h200_sandbox.sh)."""

import os
import shutil
import signal
import time

import pytest
import torch
from conftest import ROOT

from harness.audit import AUDIT_CALLS, TOLERANCE, ReportError, _judge, kernel_times, per_case

HEADER = ('"ID","Process ID","Process Name","Host Name","thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:'
          'Color:Msg_Type:Msg","Id:Domain:Start/Stop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg",'
          '"Kernel Name","Context","gpu__time_duration.sum"')
UNITS = '"","","","","","","","","ns"'
WORKER, MARKER = "3", "2"


def row(i: int, kernel: str, ns: str, pid: str = WORKER) -> str:
    return f'"{i}","{pid}","python3.12","127.0.0.1","","","{kernel}","1","{ns}"'


def report(*kernels: tuple) -> str:
    """A report of `kernels` ((name, ns) or (name, ns, pid)), numbered in order."""
    rows = [row(i, *k) for i, k in enumerate(kernels)]
    return "\n".join(["==WARNING== Note: Running with unmodified GPU clocks.",
                      "==PROF== Connected to process 2 (/usr/bin/python3.12)", HEADER, UNITS, *rows])


MARK = ("at::native::vectorized_elementwise_kernel", "1,500", MARKER)


def test_kernels_are_read_with_their_process_and_duration():
    assert kernel_times(report(("fill", "39,520"), MARK)) == [(WORKER, "fill", 39.52e-6), (MARKER, MARK[0], 1.5e-6)]
    assert kernel_times(report()) == [] and kernel_times("==PROF== Disconnected") == []


@pytest.mark.parametrize("text, why", [
    (report(("a", "1")) + "\n==ERROR== The application returned an error", "reported an error"),
    (report(("a", "1")) + "\n" + HEADER, "not its kernel 1"),                       # a second header
    (report(("a", "1")).replace(HEADER, row(0, "fake", "1")), "start with its header"),
    (report(("a", "1"), ("b", "2")).replace('"1","3"', '"0","3"'), "not its kernel 1"),  # an ID twice
    (report(("a", "1")) + "\n" + row(5, "b", "1"), "not its kernel 1"),            # an ID skipped
    (report(("a", "1")) + '\n"1","3","x"', "not its kernel 1"),                    # a short line
    (report(("a", "1")) + "\nplain text", "not its kernel 1"),
    (report(("a", "nan")), "has a duration of nan"), (report(("a", "-5")), "has a duration of -5"),
    (report(("a", "inf")), "has a duration of inf"), (report(("a", "fast")), "has no duration"),
    (report(("a", "1")) + '\n"2,"3"', "unreadable"),                                # an open quote
])
def test_a_report_the_profiler_did_not_write_is_refused(text, why):
    with pytest.raises(ReportError, match=why):
        kernel_times(text)


def plan_of(*cases: int) -> list[tuple[int, int]]:
    """The marker's kernels for `cases`: one as it starts (imports follow), then a warm-up and
    AUDIT_CALLS calls each, and one after the last call."""
    plan = [(case, call) for case in cases for call in range(-1, AUDIT_CALLS)]
    return [(-1, -1)] + plan + [plan[-1]]


def test_calls_are_cut_by_the_marker_warmups_and_imports_excluded():
    assert AUDIT_CALLS == 3
    kernels = kernel_times(report(
        ("context", "3,000"), MARK, ("import-time fill", "40,000"),  # before the first mark: not counted
        MARK, ("compile-time autotune", "900,000"),               # case 0's warm-up
        MARK, ("decode", "8,000"), ("combine", "5,000"),
        MARK, ("decode", "8,000"), ("combine", "5,000"), ("between calls", "1,000"),
        MARK, ("decode", "8,000"),
        MARK, ("autotune", "500,000"),                            # case 12's warm-up
        MARK, ("decode", "100,000"), MARK, ("decode", "100,000"), MARK, ("decode", "100,000"),
        MARK, ("left after the last call", "7,000")))             # counts for the last call
    totals, calls = per_case(kernels, MARKER, plan_of(0, 12))
    assert set(totals) == {0, 12} and calls == {0: {0, 1, 2}, 12: {0, 1, 2}}
    assert abs(totals[0] - 35e-6) < 1e-12 and abs(totals[12] - 307e-6) < 1e-12


def test_work_moved_into_a_warmup_or_a_call_without_kernels_is_seen():
    # whatever the worker labels, its kernels after a call's mark are that call's
    kernels = kernel_times(report(MARK, MARK, ("warm", "1"), MARK, ("decode", "50,000"), MARK, MARK, ("tiny", "1"), MARK))
    totals, calls = per_case(kernels, MARKER, plan_of(4))
    assert calls == {4: {0, 2}} and abs(totals[4] - 50.001e-6) < 1e-12


@pytest.mark.parametrize("kernels", [
    [MARK, ("a", "1")],                                   # marks missing (the marker was killed)
    [MARK] * 7,                                           # a mark too many
])
def test_marks_must_be_exactly_those_made(kernels):
    with pytest.raises(ReportError, match="marks"):
        per_case(kernel_times(report(*kernels)), MARKER, plan_of(0))


def test_judge_rejects_medians_below_the_profiler_and_calls_it_did_not_see(problem):
    from harness.results import CaseResult, SubmissionResult
    from harness.timing import summarize

    cases = {c.index: c for c in problem.spec.cases("benchmark", small=False)}
    assert len(cases) >= 4
    per_call = 100e-6
    medians = {0: per_call * 0.98, 1: per_call * (1 - TOLERANCE) * 0.9, 2: per_call, 3: per_call}
    result = SubmissionResult("x.py", "0")
    result.cases = [CaseResult("benchmark", i, cases[i].name, True, "", device=summarize([m] * 3), args=cases[i].args)
                    for i, m in medians.items()]
    every = set(range(AUDIT_CALLS))
    _judge(result, cases, {i: per_call * AUDIT_CALLS for i in (0, 1, 3)}, {0: every, 1: every, 3: every - {1}})
    honest, forged, unseen, partly = result.cases
    assert honest.ok and abs(honest.audit_s - per_call) < 1e-12
    assert not forged.ok and "below the profiler's 100.0 µs" in forged.reason
    assert not unseen.ok and "GPU kernels in 0 of this case's 3 audit calls" in unseen.reason
    assert not partly.ok and "in 2 of this case's 3" in partly.reason
    assert not result.ok and result.audit == "audit failed: no kernels seen in 2 case(s)"


# A stand-in for the profiler: runs the program, then writes a report line to its standard output.
STAND_IN = ["/bin/sh", "-c", '"$@"; code=$?; echo "==PROF== stand-in report"; exit $code', "stand-in"]


def profiled(cpu, tmp_path, submission):
    from harness.sandbox import Sandbox

    path = tmp_path / submission.name
    shutil.copy(submission, path)
    return Sandbox(path, cpu, tmp_path / "audit.log", 120, sandbox="auto", wrapper=STAND_IN,
                   report=tmp_path / "report.csv", marker=True)


def test_the_profiled_worker_runs_beside_its_marker_and_its_output_stays_out_of_the_report(cpu, tmp_path, problem):
    box = profiled(cpu, tmp_path, ROOT / "tests" / "zoo" / "prints_results.py")
    try:
        box.wait_ready()
        data = problem.generate(problem.spec.cases("test", small=True)[0].args, 1, cpu.torch_device)
        box.share_inputs(data, *problem.layout(data))
        box.mark(30)
        output, _ = box.call(False, 60)
        box.mark(30)
        assert isinstance(output, torch.Tensor) and box.marker_pid.isdigit()
    finally:
        box.close()
    assert box.worker.proc.returncode == 0
    assert box.worker.report.path.read_text() == "==PROF== stand-in report\n"
    assert "check: pass" in (tmp_path / "audit.log").read_text()


def test_a_dead_marker_fails_the_mark(cpu, tmp_path):
    from harness.sandbox import WorkerFailure

    box = profiled(cpu, tmp_path, ROOT / "submissions" / "torch_batched.py")
    try:
        box.wait_ready()
        box.mark(30)
        for pid in filter(str.isdigit, os.listdir("/proc")):  # kill it, as the submission could
            try:
                cmdline = open(f"/proc/{pid}/cmdline", "rb").read()
            except OSError:
                continue
            if b"harness.worker.marker" in cmdline and str(tmp_path).encode() in cmdline:
                os.kill(int(pid), signal.SIGKILL)
        t0 = time.monotonic()
        with pytest.raises(WorkerFailure, match="marker process failed"):
            box.mark(30)
        assert time.monotonic() - t0 < 10
    finally:
        box.close()
