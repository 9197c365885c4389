"""lab/cupti_compare.py on the CPU: the GPU measurement itself runs only on the H200, so what is
tested here is what decides its verdicts: the parsing of a profiler trace, the attribution of
GPU activities to calls, the per-call numbers, the comparison with a leaderboard export and its
flags (all pure functions, on synthetic traces), and the command line (--help; --load/--compare
needs no GPU)."""

import json
import subprocess
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "lab"))
import cupti_compare as cc  # noqa: E402

TOOL = ROOT / "lab" / "cupti_compare.py"


# ---------------------------------------------------------------- a synthetic profiler trace
class Trace:
    """Builds a Chrome trace as torch.profiler's export_chrome_trace writes it (µs)."""

    def __init__(self):
        self.events = [{"ph": "M", "name": "process_name", "ts": 0, "pid": 1, "tid": 0, "args": {"name": "python3"}}]
        self.corr = 0

    def window(self, label, start, end):
        self.events.append({"ph": "X", "cat": "user_annotation", "name": cc.MARK + label, "ts": start,
                            "dur": end - start, "args": {"External id": 1}})
        # the GPU-side copy of the annotation Kineto adds: not a window
        self.events.append({"ph": "X", "cat": "gpu_user_annotation", "name": cc.MARK + label, "ts": start + 1,
                            "dur": end - start, "args": {}})

    def launch(self, at, name="cudaLaunchKernel", cat="cuda_runtime", dur=3.0):
        self.corr += 1
        self.events.append({"ph": "X", "cat": cat, "name": name, "ts": at, "dur": dur,
                            "args": {"cbid": 211, "correlation": self.corr}})
        return self.corr

    def gpu(self, start, dur, corr=None, cat="kernel", name="void k()"):
        args = {"device": 0, "stream": 7}
        if corr is not None:
            args["correlation"] = corr
        self.events.append({"ph": "X", "cat": cat, "name": name, "ts": start, "dur": dur, "args": args})

    def dict(self):
        return {"schemaVersion": 1, "traceEvents": list(self.events)}


def one_call(t: Trace, i: int, t0: float, gate_until: float, kernels=((10.0, 5.0), (16.0, 4.0)), graph=False):
    """Call i at host time t0: the refill and the flush (launched before any window), the gate
    (launched in gate:i, running until gate_until), then the call's launches in call:i; its GPU
    work runs from gate_until on. `kernels`: (offset after the gate, duration)."""
    flush = t.launch(t0 - 200, "cudaLaunchKernel")
    t.gpu(t0 - 195, 40.0, flush, name="void flush_fill()")
    copy = t.launch(t0 - 150, "cudaMemcpyAsync")
    t.gpu(t0 - 148, 10.0, copy, cat="gpu_memcpy", name="Memcpy DtoD (Device -> Device)")
    t.window(f"gate:{i}", t0 - 20, t0 - 10)
    g = t.launch(t0 - 18)
    t.gpu(t0 - 15, gate_until - (t0 - 15), g, name="spin_kernel(long)")
    t.window(f"call:{i}", t0, t0 + 500)
    at = t0 + 2
    if graph:  # every kernel of a replayed graph carries the cudaGraphLaunch's correlation id
        corr = t.launch(at, "cudaGraphLaunch")
        for off, dur in kernels:
            t.gpu(gate_until + off, dur, corr, name="void graph_node()")
        at += 5
    else:
        for off, dur in kernels:
            corr = t.launch(at, "cuLaunchKernel", cat="cuda_driver")
            t.gpu(gate_until + off, dur, corr)
            at += 5
    out = t.launch(at, "cudaMemcpyAsync")  # the output's copy into the slot
    last_end = max(off + dur for off, dur in kernels)
    t.gpu(gate_until + last_end + 1, 2.0, out, cat="gpu_memcpy", name="Memcpy DtoD (Device -> Device)")
    t.launch(at + 5, "cudaDeviceSynchronize", dur=300)  # no GPU activity of its own


def test_parse_trace_reads_activities_launches_and_only_its_own_windows():
    t = Trace()
    t.window("call:0", 100, 200)
    t.events.append({"ph": "X", "cat": "user_annotation", "name": "someone_elses_range", "ts": 100, "dur": 5})
    t.events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 101, "dur": 5, "args": {}})
    t.events.append({"ph": "f", "cat": "ac2g", "id": 1, "ts": 102})
    t.events.append({"ph": "X", "cat": "kernel", "name": "bad ts", "ts": "x"})  # unreadable: skipped
    c1 = t.launch(110)
    t.gpu(120, 5, c1)
    c2 = t.launch(115, "cudaMemsetAsync")
    t.gpu(126, 1, c2, cat="gpu_memset", name="Memset (Device)")
    t.gpu(130, 2, None, cat="Memcpy", name="Memcpy HtoD")   # older category spelling, no correlation
    acts, launches, windows = cc.parse_trace(t.dict())
    assert [(a.kind, a.start, a.end, a.correlation) for a in acts] == [
        ("kernel", 120.0, 125.0, c1), ("memset", 126.0, 127.0, c2), ("memcpy", 130.0, 132.0, None)]
    assert set(launches) == {c1, c2} and launches[c1].end == 113.0
    assert windows == [cc.Window("call:0", 100.0, 200.0)]


def test_attribution_by_launch_keeps_flush_refill_and_gate_out_of_every_call():
    t = Trace()
    one_call(t, 0, 1000.0, gate_until=1100.0)
    one_call(t, 1, 2000.0, gate_until=2080.0, graph=True)
    acts, launches, windows = cc.parse_trace(t.dict())
    placed, loose, how = cc.attribute(acts, launches, windows)
    # the gate kernel runs into call:0's window in time, but was launched in gate:0
    assert [a.name for a in placed["gate:0"]] == ["spin_kernel(long)"]
    assert [a.kind for a in placed["call:0"]] == ["kernel", "kernel", "memcpy"]
    assert [a.name for a in placed["call:1"]] == ["void graph_node()", "void graph_node()",
                                                 "Memcpy DtoD (Device -> Device)"]
    assert {a.name for a in loose} == {"void flush_fill()", "Memcpy DtoD (Device -> Device)"} and len(loose) == 4
    assert how == {"launch": 8, "start time": 0}


def test_a_launch_linked_to_its_cpu_op_is_timed_by_the_op_not_by_a_skewed_cupti_clock():
    t = Trace()
    t.window("gate:0", 80, 95)
    t.window("call:0", 100, 200)
    t.events.append({"ph": "X", "cat": "cpu_op", "name": "aten::bmm", "ts": 105, "dur": 20,
                     "args": {"External id": 42}})
    corr = t.launch(90)                         # CUPTI's clock a few µs behind: inside the gate's window
    t.events[-1]["args"]["External id"] = 42    # ...but launched from aten::bmm, inside call:0
    t.gpu(150, 5, corr)
    acts, launches, windows = cc.parse_trace(t.dict())
    assert launches[corr].anchor == 105.0 and launches[corr].at == 105.0
    placed, _, _ = cc.attribute(acts, launches, windows)
    assert len(placed["call:0"]) == 1 and placed["gate:0"] == []
    unlinked = cc.Launch(corr, "cudaLaunchKernel", 90.0, 93.0)
    placed, _, _ = cc.attribute(acts, {corr: unlinked}, windows)
    assert len(placed["gate:0"]) == 1           # without the link, its own start decides


def test_attribution_by_start_time_when_the_trace_has_no_launch():
    windows = [cc.Window("gate:0", 0, 10), cc.Window("call:0", 20, 100), cc.Window("call:1", 200, 300)]
    acts = [cc.Activity("kernel", "spin_kernel", 15, 40),        # no launch: placed by its start...
            cc.Activity("kernel", "spin_kernel", 25, 40),        # ...an excluded name is never placed
            cc.Activity("kernel", "k", 50, 60),
            cc.Activity("kernel", "k", 250, 260, correlation=99),  # correlation with no launch event: start time
            cc.Activity("kernel", "k", 150, 160)]                 # between windows
    placed, loose, how = cc.attribute(acts, {}, windows, exclude_names={"spin_kernel"})
    assert [a.start for a in placed["call:0"]] == [50]
    assert [a.start for a in placed["call:1"]] == [250]
    assert placed["gate:0"] == []
    assert sorted(a.start for a in loose) == [15, 25, 150]
    assert how == {"launch": 0, "start time": 2}


def test_call_metrics_sums_span_and_overlap():
    acts = [cc.Activity("kernel", "a", 0, 10), cc.Activity("kernel", "b", 5, 20),  # overlapping (two streams)
            cc.Activity("memcpy", "c", 25, 28), cc.Activity("memset", "d", 30, 31)]
    m = cc.call_metrics(acts)
    assert m == {"kernels": 2, "copies": 2, "kernel_sum_us": 25, "with_copies_us": 29, "span_us": 31,
                 "kernel_busy_us": 20}
    assert cc.call_metrics([])["span_us"] == 0.0
    assert cc.union_length([(0, 1), (2, 3), (2.5, 4), (10, 10)]) == 3


def test_gate_held_compares_the_gate_end_with_the_last_launch():
    launches = {1: cc.Launch(1, "cudaLaunchKernel", 10, 13), 2: cc.Launch(2, "cudaLaunchKernel", 14, 18)}
    call = [cc.Activity("kernel", "k", 30, 31, 1), cc.Activity("kernel", "k", 31, 32, 2)]
    assert cc.gate_held([cc.Activity("kernel", "spin", 5, 25)], call, launches) is True
    assert cc.gate_held([cc.Activity("kernel", "spin", 5, 16)], call, launches) is False
    assert cc.gate_held([], call, launches) is None
    assert cc.gate_held([cc.Activity("kernel", "spin", 5, 25)], [cc.Activity("kernel", "k", 30, 31)], {}) is None


def test_case_from_trace_medians_over_the_calls_whose_gate_held():
    t = Trace()
    t.window("probe", 0, 50)
    t.gpu(5, 10, t.launch(2), name="spin_kernel(long)")
    for i, (kernels, gate_until) in enumerate([(((1, 10), (12, 10)), 1200.0),   # gate held: 22 µs + copy
                                               (((1, 10), (12, 30)), 2200.0),   # held: 42 µs
                                               (((1, 10), (12, 20)), 3200.0),   # held: 32 µs
                                               (((1, 500), (502, 1)), 4005.0)]):  # gate ended before the launches
        one_call(t, i, 1000.0 * (i + 1), gate_until, kernels)
    case = cc.case_from_trace(t.dict(), n_calls=4)
    assert [c["gate_held"] for c in case["per_call"]] == [True, True, True, False]
    m = case["medians"]
    assert (m["calls"], m["used"], m["gate_held"]) == (4, 3, 3)
    assert m["kernel_sum_us"] == 30 and m["with_copies_us"] == 32 and m["kernels"] == 2 and m["copies"] == 1
    assert m["span_us"] == (12 + 20 + 1 + 2) - 1   # the first kernel's start to the output copy's end
    assert case["windows_found"] == 4


def test_compare_flags_penalised_and_undercounted_cases():
    cupti = {"4×1k": {"calls": 20, "kernel_sum_us": 40.0, "kernel_busy_us": 40.0, "with_copies_us": 45.0,
                      "span_us": 50.0},
             "4×8k": {"calls": 20, "kernel_sum_us": 100.0, "kernel_busy_us": 100.0, "span_us": 110.0},
             "32×1k": {"calls": 20, "kernel_sum_us": 100.0, "kernel_busy_us": 60.0, "span_us": 70.0},
             "32×8k": {"calls": 20, "kernel_sum_us": 100.0, "kernel_busy_us": 100.0, "span_us": 110.0},
             "64×1k": {"calls": 20, "kernel_sum_us": 0.0, "kernel_busy_us": 0.0, "span_us": 0.0}}
    ranked = {"4×1k": {"median_us": 52.4, "kernel_us": 49.0},   # +4.8% over the span: within 5%
              "4×8k": {"median_us": 116.0},                     # +5.5%: penalised
              "32×1k": {"median_us": 58.0},                     # below the kernel sum, but the kernels overlap
              "32×8k": {"median_us": 94.0},                     # 6% below the kernel time: under-counted
              "64×1k": {"median_us": 10.0}}
    rows = {r["case"]: r for r in cc.compare(cupti, ranked)}
    assert rows["4×1k"]["flags"] == [] and rows["4×1k"]["ratio"] == pytest.approx(1.048)
    assert rows["4×1k"]["worker_kernel_us"] == 49.0
    assert rows["4×8k"]["flags"] == ["ranked +5.5% above the CUPTI span"]
    assert rows["32×1k"]["flags"] == []
    assert rows["32×8k"]["flags"] == ["ranked 6.0% below the CUPTI kernel time"]
    assert rows["64×1k"]["flags"] == ["no GPU activity attributed to the calls"]
    assert cc.compare({"4×1k": cupti["4×1k"]}, {}, 0.05)[0]["flags"] == ["no ranked time (case not in the export)"]
    failed = cc.compare({"4×1k": cupti["4×1k"]}, {"4×1k": {"median_us": None, "detail": "timed call 3: wrong"}})
    assert failed[0]["flags"] == ["no ranked time (timed call 3: wrong)"] and failed[0]["ratio"] is None
    assert cc.compare({"4×8k": cupti["4×8k"]}, ranked, tolerance=0.06)[0]["flags"] == []
    text = cc.format_comparison(list(rows.values()), "x.py", verified=False)
    assert "UNVERIFIED" in text and "3 of 5 case(s) flagged" in text and "1.048" in text


def _export(tmp_path, names=("multi_kernel.py",), audit="verified: the parent's clock, fenced around each call"):
    """A leaderboard --json export as harness/report/ writes it."""
    from harness import report
    from harness.results import CaseResult, SubmissionResult
    from harness.timing import summarize

    results = []
    for name in names:
        cases = [CaseResult("test", 0, "t", True, "ok", args={"batchsize": 4, "kvseqlen": 1024}),
                 CaseResult("benchmark", 0, "b0", True, "ok", device=summarize([50e-6, 52e-6, 51e-6]),
                            kernel=summarize([45e-6]), args={"batchsize": 4, "kvseqlen": 1024}),
                 CaseResult("benchmark", 1, "b1", False, "timed call 2: output has 3 NaN/inf values",
                            args={"batchsize": 4, "kvseqlen": 8192})]
        results.append(SubmissionResult(f"tests/honest/{name}", "0" * 64, ok=False, cases=cases, audit=audit))
    path = tmp_path / "board.json"
    report.write_exports(results, lambda a: f"{a['batchsize']}×{a['kvseqlen'] // 1024}k", None, {"run": 1},
                         json_path=str(path))
    return path


def test_ranked_rows_reads_the_harness_export(tmp_path):
    export = json.loads(_export(tmp_path).read_text())
    name, verified, rows = cc.ranked_rows(export, "tests/honest/multi_kernel.py")
    assert (name, verified, sorted(rows)) == ("multi_kernel.py", True, ["4×1k", "4×8k"])
    assert rows["4×1k"]["median_us"] == pytest.approx(51.0) and rows["4×1k"]["kernel_us"] == pytest.approx(45.0)
    assert rows["4×8k"]["median_us"] is None and "NaN" in rows["4×8k"]["detail"]
    two = json.loads(_export(tmp_path, ("a.py", "b.py"), audit="unverified: CPU").read_text())
    assert cc.ranked_rows(two, "b.py")[:2] == ("b.py", False)
    with pytest.raises(ValueError, match="several submission"):
        cc.ranked_rows(two, None)
    with pytest.raises(ValueError, match="no submission"):
        cc.ranked_rows(two, "c.py")
    with pytest.raises(ValueError, match="not a leaderboard"):
        cc.ranked_rows({"targets": []}, None)


def test_command_line_help_and_compare_without_a_gpu(tmp_path):
    run = subprocess.run([sys.executable, str(TOOL), "--help"], capture_output=True, text=True, timeout=30)
    assert run.returncode == 0 and "--compare" in run.stdout and "--calls" in run.stdout
    board = _export(tmp_path)
    cupti = tmp_path / "cupti.json"
    cupti.write_text(json.dumps({"submission": "tests/honest/multi_kernel.py", "cases": [
        {"case": "4×1k", "medians": {"calls": 20, "kernel_sum_us": 45.0, "kernel_busy_us": 45.0,
                                     "with_copies_us": 49.0, "span_us": 50.0}}]}))
    run = subprocess.run([sys.executable, str(TOOL), "--load", str(cupti), "--compare", str(board)],
                         capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stderr
    assert "all 1 case(s) within the tolerance" in run.stdout and "1.020" in run.stdout
    run = subprocess.run([sys.executable, str(TOOL), "--load", str(cupti), "--compare", str(board),
                          "--tolerance", "0.01"], capture_output=True, text=True, timeout=30)
    assert run.returncode == 1 and "above the CUPTI span" in run.stdout
    for argv, said in (([str(tmp_path / "missing.py")], "no such file"),
                       (["--load", str(board)], "not a cupti_compare --json file"),
                       (["--load", str(cupti), "--compare", str(tmp_path / "nope.json")], "no such file"),
                       (["x.py", "--calls", "0"], "--calls must be")):
        run = subprocess.run([sys.executable, str(TOOL), *argv], capture_output=True, text=True, timeout=30)
        assert run.returncode == 2 and run.stderr.startswith("cupti_compare: ") and said in run.stderr, run.stderr
        assert len(run.stderr.strip().splitlines()) == 1
