"""The profiler audit's arithmetic (harness/audit.py) on reports in Nsight Compute's own CSV format
(`--csv --page raw --nvtx`, header and cells as the H200's ncu writes them, BENCHMARKS.md); the
audit itself runs on the GPU (tools/h200_sandbox.sh)."""

from harness.audit import MARK, kernel_times, per_case

HEADER = ('"ID","Process ID","Process Name","Host Name","thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:'
          'Color:Msg_Type:Msg","Id:Domain:Start/Stop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg",'
          '"Kernel Name","Context","gpu__time_duration.sum"')
UNITS = '"","","","","","","","","ns"'


def row(i: int, kernel: str, range_name: str, ns: str) -> str:
    stack = f'2  ""<default domain>:{range_name}:none:none:none:none:none:none"" ' if range_name else ""
    return f'"{i}","2","python3.12","127.0.0.1","{stack}","","{kernel}","1","{ns}"'


def report(*rows: str) -> str:
    return "\n".join(["==PROF== Connected to process 2 (/usr/bin/python3.12)", HEADER, UNITS, *rows,
                      "==PROF== Disconnected from process 2"])


def test_kernels_are_read_with_their_ranges_and_durations():
    text = report(row(0, "fill", "", "39,520"), row(1, "_mla_decode_kernel", f"{MARK}/3", "10,944"))
    assert kernel_times(text) == [("fill", "", 39.52e-6),  # noqa: E501
                                  ("_mla_decode_kernel", f'2  "<default domain>:{MARK}/3:none:none:none:none:none:none" ',
                                   10.944e-6)]


def test_calls_are_summed_per_case_warmup_and_import_excluded():
    text = report(
        row(0, "import-time fill", "", "40,000"),              # before any call: not counted
        row(1, "compile-time autotune", f"{MARK}/warmup/0", "900,000"),
        row(2, "decode", f"{MARK}/0", "8,000"), row(3, "combine", f"{MARK}/0", "5,000"),
        row(4, "decode", f"{MARK}/0", "8,000"), row(5, "combine", f"{MARK}/0", "5,000"),
        row(6, "between calls", "", "1,000"),                  # after an audited call: counts for case 0
        row(7, "autotune", f"{MARK}/warmup/12", "500,000"),
        row(8, "precomputed between warm-up and call", "", "70,000"),  # counts for case 12
        row(9, "decode", f"{MARK}/12", "100,000"))
    totals = per_case(kernel_times(text))
    assert set(totals) == {0, 12}
    assert abs(totals[0] - 27e-6) < 1e-12 and abs(totals[12] - 170e-6) < 1e-12


def test_a_report_without_kernels_gives_nothing():
    assert per_case(kernel_times(report())) == {}
    assert kernel_times("==ERROR== the application crashed") == []


def test_judge_rejects_medians_below_the_profiler_and_cases_it_did_not_see(problem):
    from harness.audit import AUDIT_CALLS, TOLERANCE, _judge
    from harness.results import CaseResult, SubmissionResult
    from harness.timing import summarize

    cases = {c.index: c for c in problem.spec.cases("benchmark", small=True)}
    assert len(cases) >= 3
    per_call = 100e-6
    medians = {0: per_call * 0.98, 1: per_call * (1 - TOLERANCE) * 0.9, 2: per_call}  # honest, forged, unseen
    result = SubmissionResult("x.py", "0")
    result.cases = [CaseResult("benchmark", i, cases[i].name, True, "", device=summarize([m] * 3), args=cases[i].args)
                    for i, m in medians.items()]
    _judge(result, cases, {0: per_call * AUDIT_CALLS, 1: per_call * AUDIT_CALLS})
    honest, forged, unseen = result.cases
    assert honest.ok and abs(honest.audit_s - per_call) < 1e-12
    assert not forged.ok and "below the profiler's 100.0 µs" in forged.reason
    assert not unseen.ok and "saw no GPU kernels" in unseen.reason
    assert not result.ok and result.audit == "audit failed: no kernels seen in 1 case(s)"
