"""An independent measurement of a submission's GPU time with CUPTI (torch.profiler), to set beside
the harness's ranked times (issue 37: the fence must never reject or penalise an honest file).

For each benchmark case of the task (the harness's own case list, and inputs made by the harness's
own `Problem.generate`), the submission is imported in this process (a trusted diagnostic: no
sandbox, no fence), warmed up, then N calls run inside ONE profiler session
(activities CPU + CUDA; CUDA is CUPTI's activity tracing). Each call is prepared as the parent's
fence prepares a timed call (harness/parent/fence.py): every input but q refilled in place from another
seed's inputs, L2 flushed (a buffer of 2x the L2 size written, then read), q refilled, the device
synchronised. Then a spin kernel ("gate", torch.cuda._sleep, sized to outlast the call's host-side
launches) is queued, and the call runs inside a `record_function` window that also holds the copy
of its output into a slot (the worker copies the output inside the fenced interval too) and a
final torch.cuda.synchronize(). As under the fence, the call's launches are queued behind a gate,
so the GPU runs them back to back and no launch latency lands in the span.

Attribution (from the exported Chrome trace): every GPU activity (kernel, memcpy, memset) carries
the correlation id of the API call that launched it (cudaLaunchKernel, cuLaunchKernel,
cudaMemcpyAsync, cudaGraphLaunch for every kernel of a replayed graph, ...); an activity belongs to
the call whose window holds that launch (timed by the start of the CPU op it was launched from,
linked by "External id", where the trace has it: CPU ops and windows share the profiler's clock,
so no CPU/GPU clock alignment is needed). Activities with no launch in the trace fall back to the
window holding their GPU start, the gate kernel excluded by its name (learnt from a "probe" window
that runs the gate alone). The flush, the refills and the gate are launched outside the call
windows, so they are never counted. A call's gate held when the gate kernel ended after the call's
last launch returned.

Per call: the sum of kernel durations, the sum with memcpy/memset, the span from the first GPU
activity's start to the last one's end, and the union of the kernel intervals (equal to the
kernel sum on one stream). Per case: their medians over the calls whose gate held (all calls if
none held).

Usage (GPU machine, repo root):
    python3 lab/cupti_compare.py FILE [--calls 20] [--case 0 --case 3] [--json OUT.json]
                                         [--compare LEADERBOARD.json]
    python3 lab/cupti_compare.py --load OUT.json --compare LEADERBOARD.json   # no GPU needed
LEADERBOARD.json is `eval.py --mode leaderboard --json` of a run that timed FILE. The comparison
flags a case whose ranked median is more than --tolerance (5%) above the CUPTI span (penalised) or
more than 5% below the CUPTI kernel time (under-counted). Exit 0: measured (and, with --compare,
nothing flagged); 1: a flag, a failed check or a case with no GPU activity; 2: bad usage or no GPU.
"""

from __future__ import annotations

import argparse
import bisect
import dataclasses
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

ROOT = Path(__file__).resolve().parents[1]

MARK = "cupti_compare:"            # prefix of this tool's record_function windows
ACTIVITY_KINDS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "memcpy": "memcpy", "gpu_memset": "memset",
                  "memset": "memset"}
LAUNCH_CATEGORIES = ("cuda_runtime", "runtime", "cuda_driver", "driver")
TOLERANCE = 0.05
GATE_MIN_US = 100.0
GATE_MAX_US = 200_000.0


class ToolError(Exception):
    """A one-line reason the tool cannot go on (exit 2)."""


# ---------------------------------------------------------------- trace parsing (pure)
@dataclasses.dataclass(frozen=True)
class Activity:
    kind: str                      # "kernel", "memcpy" or "memset"
    name: str
    start: float                   # µs, the trace's clock
    end: float
    correlation: Optional[int] = None


@dataclasses.dataclass(frozen=True)
class Launch:
    correlation: int
    name: str
    start: float
    end: float
    anchor: Optional[float] = None  # start of the CPU op it was launched from (the profiler's own clock)

    @property
    def at(self) -> float:
        """When it was launched, for attribution: its CPU op's start where the trace links them (CPU ops
        and this tool's windows share one clock), else its own start (CUPTI's clock, converted)."""
        return self.start if self.anchor is None else self.anchor


@dataclasses.dataclass(frozen=True)
class Window:
    label: str                     # the record_function name without MARK: "call:3", "gate:3", "probe"
    start: float
    end: float


def _correlation(event: dict) -> Optional[int]:
    args = event.get("args") or {}
    value = args.get("correlation", args.get("correlation id"))
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None


def _external_id(event: dict) -> Optional[int]:
    value = (event.get("args") or {}).get("External id")
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def parse_trace(trace: dict, prefix: str = MARK) -> tuple[list[Activity], dict[int, Launch], list[Window]]:
    """(GPU activities, launching API calls by correlation id, this tool's windows) from a Chrome
    trace as torch.profiler's export_chrome_trace writes it (complete "X" events, µs). A launch whose
    "External id" names a CPU op (or a record_function range) of the trace is anchored at that op's
    start."""
    activities, launches, windows = [], {}, []
    cpu_starts: dict[int, float] = {}
    pending: list[tuple[Launch, int]] = []
    for event in trace.get("traceEvents", []):
        if not isinstance(event, dict) or event.get("ph") != "X":
            continue
        cat = str(event.get("cat", "")).lower()
        try:
            start = float(event["ts"])
            end = start + float(event.get("dur", 0.0))
        except (KeyError, TypeError, ValueError):
            continue
        name = str(event.get("name", ""))
        if cat in ACTIVITY_KINDS:
            activities.append(Activity(ACTIVITY_KINDS[cat], name, start, end, _correlation(event)))
        elif cat in LAUNCH_CATEGORIES:
            corr = _correlation(event)
            if corr is not None:
                launches[corr] = Launch(corr, name, start, end)
                ext = _external_id(event)
                if ext:
                    pending.append((launches[corr], ext))
        elif cat in ("cpu_op", "user_annotation"):
            ext = _external_id(event)
            if ext:
                cpu_starts.setdefault(ext, start)
            if cat == "user_annotation" and name.startswith(prefix):
                windows.append(Window(name[len(prefix):], start, end))
    for launch, ext in pending:
        if ext in cpu_starts and launches.get(launch.correlation) is launch:
            launches[launch.correlation] = dataclasses.replace(launch, anchor=cpu_starts[ext])
    activities.sort(key=lambda a: (a.start, a.end))
    windows.sort(key=lambda w: w.start)
    return activities, launches, windows


def attribute(activities: Iterable[Activity], launches: dict[int, Launch], windows: Sequence[Window],
              exclude_names: Iterable[str] = ()) -> tuple[dict[str, list[Activity]], list[Activity], dict[str, int]]:
    """({window label: its activities}, the activities of no window, how many were placed by
    launch and by start time). An activity whose launching API call is in the trace belongs to the
    window holding that launch (`Launch.at`: its CPU op's start, else its own); any other, to the
    window holding its own GPU start, unless its name is in `exclude_names` (the gate kernel,
    launched outside every call window)."""
    ordered = sorted(windows, key=lambda w: w.start)
    starts = [w.start for w in ordered]
    excluded = set(exclude_names)

    def holding(t: float) -> Optional[Window]:
        i = bisect.bisect_right(starts, t) - 1
        return ordered[i] if i >= 0 and t <= ordered[i].end else None

    placed: dict[str, list[Activity]] = {w.label: [] for w in ordered}
    loose: list[Activity] = []
    how = {"launch": 0, "start time": 0}
    for act in activities:
        launch = launches.get(act.correlation) if act.correlation is not None else None
        if launch is not None:
            window, way = holding(launch.at), "launch"
        elif act.name in excluded:
            window, way = None, ""
        else:
            window, way = holding(act.start), "start time"
        if window is None:
            loose.append(act)
        else:
            placed[window.label].append(act)
            how[way] += 1
    return placed, loose, how


def union_length(intervals: Iterable[tuple[float, float]]) -> float:
    """Total length covered by the intervals (overlaps counted once)."""
    total, cur_start, cur_end = 0.0, None, None
    for start, end in sorted(intervals):
        if cur_end is None or start > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    if cur_end is not None:
        total += cur_end - cur_start
    return total


def call_metrics(acts: Sequence[Activity]) -> dict[str, Any]:
    """One call's numbers (µs) from its GPU activities."""
    kernels = [a for a in acts if a.kind == "kernel"]
    return {
        "kernels": len(kernels),
        "copies": len(acts) - len(kernels),
        "kernel_sum_us": sum(a.end - a.start for a in kernels),
        "with_copies_us": sum(a.end - a.start for a in acts),
        "span_us": (max(a.end for a in acts) - min(a.start for a in acts)) if acts else 0.0,
        "kernel_busy_us": union_length((a.start, a.end) for a in kernels),
    }


def gate_held(gate: Sequence[Activity], call: Sequence[Activity], launches: dict[int, Launch]) -> Optional[bool]:
    """Whether the gate kernel was still running when the call's last launch returned (so the GPU
    ran the call's work back to back, as behind the fence's gate); None when unknown (no gate
    kernel, or no correlated launch)."""
    ends = [launches[a.correlation].end for a in call if a.correlation in launches]
    if not gate or not ends:
        return None
    return max(a.end for a in gate) >= max(ends)


def median(values: Sequence[float]) -> Optional[float]:
    return statistics.median(values) if values else None


METRICS = ("kernel_sum_us", "with_copies_us", "span_us", "kernel_busy_us", "kernels", "copies")


def summarize(calls: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Medians of the per-call numbers, over the calls whose gate held (all calls when none held
    or it is unknown for every call); `used` says how many."""
    held = [c for c in calls if c.get("gate_held")]
    chosen = held or list(calls)
    out = {k: median([c[k] for c in chosen]) for k in METRICS}
    out.update(calls=len(calls), used=len(chosen), gate_held=len(held),
               gate_unknown=sum(c.get("gate_held") is None for c in calls))
    return out


def case_from_trace(trace: dict, n_calls: int) -> dict[str, Any]:
    """Everything one case's profiled session says: per-call numbers and their medians."""
    activities, launches, windows = parse_trace(trace)
    probe_names = set()
    if any(w.label == "probe" for w in windows):  # the gate kernel's name, for activities with no launch
        placed, _, _ = attribute(activities, launches, [w for w in windows if w.label == "probe"])
        probe_names = {a.name for a in placed["probe"]}
    placed, loose, how = attribute(activities, launches, windows, probe_names)
    calls = []
    for i in range(n_calls):
        acts = placed.get(f"call:{i}")
        if acts is None:
            continue
        metrics = call_metrics(acts)
        metrics["gate_held"] = gate_held(placed.get(f"gate:{i}", []), acts, launches)
        calls.append(metrics)
    return {"per_call": calls, "medians": summarize(calls), "attributed_by": how,
            "windows_found": sum(w.label.startswith("call:") for w in windows), "unattributed": len(loose)}


# ---------------------------------------------------------------- the comparison (pure)
def ranked_rows(export: dict, name: Optional[str]) -> tuple[str, bool, dict[str, dict]]:
    """(submission name, timing_verified, {case label: its benchmark row}) from a leaderboard
    --json export (harness/report/exports.py, `write_exports`); `name` picks the submission (its file name,
    or the run's display name), needed only when the export holds several. ValueError otherwise."""
    rows = export.get("rows") if isinstance(export, dict) else None
    if not isinstance(rows, list):
        raise ValueError("not a leaderboard --json export (no \"rows\" list)")
    names = list(dict.fromkeys(str(r.get("submission")) for r in rows if isinstance(r, dict)))
    if name is not None:
        matches = [n for n in names if n == name] or [n for n in names if Path(n).name == Path(name).name]
    else:
        matches = names
    if len(matches) != 1:
        raise ValueError(f"{'no' if not matches else 'several'} submission(s) matching "
                         f"{name or 'any'} in the export (it has: {', '.join(names) or 'none'}); use --name")
    chosen = matches[0]
    mine = [r for r in rows if isinstance(r, dict) and str(r.get("submission")) == chosen]
    verified = bool(mine and mine[0].get("timing_verified"))
    return chosen, verified, {str(r.get("case")): r for r in mine if r.get("kind") == "benchmark"}


def compare(cupti: dict[str, dict], ranked: dict[str, dict], tolerance: float = TOLERANCE) -> list[dict[str, Any]]:
    """Per case (in `cupti`'s order): ranked µs beside the CUPTI medians, and the flags: ranked more
    than `tolerance` above the span (penalised), or more than `tolerance` below the kernel time
    (under-counted; the kernel time is the union of the kernel intervals, the kernel sum on one
    stream: overlapping kernels on several streams do not add up)."""
    out = []
    for label, m in cupti.items():
        row = ranked.get(label) or {}
        r = row.get("median_us")
        span, ksum, busy = m.get("span_us"), m.get("kernel_sum_us"), m.get("kernel_busy_us")
        lower = busy if busy is not None else ksum
        flags = []
        if not m.get("calls"):
            flags.append("no call measured")
        elif not span:
            flags.append("no GPU activity attributed to the calls")
        if r is None:
            flags.append("no ranked time" + (f" ({str(row.get('detail'))[:80]})" if row else " (case not in the export)"))
        elif span:
            if r > span * (1 + tolerance):
                flags.append(f"ranked {r / span - 1:+.1%} above the CUPTI span")
            if lower and r < lower * (1 - tolerance):
                flags.append(f"ranked {1 - r / lower:.1%} below the CUPTI kernel time")
        out.append({"case": label, "ranked_us": r, "worker_kernel_us": row.get("kernel_us"),
                    "kernel_sum_us": ksum, "kernel_busy_us": busy, "with_copies_us": m.get("with_copies_us"),
                    "span_us": span, "ratio": (r / span) if r is not None and span else None, "flags": flags})
    return out


def _us(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:,.1f}"


def format_comparison(rows: Sequence[dict[str, Any]], name: str, verified: bool) -> str:
    lines = [f"{name}: ranked median (leaderboard export{'' if verified else ', UNVERIFIED timing'}) vs CUPTI medians",
             f"{'case':>16} {'ranked µs':>11} {'kernel sum µs':>14} {'+copies µs':>11} {'span µs':>11} "
             f"{'ranked/span':>11}  flags"]
    for r in rows:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.3f}"
        lines.append(f"{r['case']:>16} {_us(r['ranked_us']):>11} {_us(r['kernel_sum_us']):>14} "
                     f"{_us(r['with_copies_us']):>11} {_us(r['span_us']):>11} {ratio:>11}  "
                     f"{'; '.join(r['flags']) or 'ok'}")
    flagged = sum(bool(r["flags"]) for r in rows)
    lines.append(f"{flagged} of {len(rows)} case(s) flagged" if flagged else f"all {len(rows)} case(s) within the tolerance")
    return "\n".join(lines)


def format_measurement(result: dict) -> str:
    lines = [f"{result['submission']} on {result['device']}: CUPTI medians over {result['calls']} call(s) per case "
             f"(gate {'on' if result['gate'] else 'off'}, L2 flush {result['flush_bytes'] / 2**20:.0f} MiB)",
             f"{'case':>16} {'kernel sum µs':>14} {'+copies µs':>11} {'span µs':>11} {'busy µs':>11} "
             f"{'kernels':>8} {'copies':>7} {'gated':>7}  check"]
    by = {"launch": 0, "start time": 0}
    loose = 0
    for c in result["cases"]:
        m = c["medians"]
        said = f"ERROR {c['error']}" if c.get("error") else c.get("check", "-")
        lines.append(f"{c['case']:>16} {_us(m['kernel_sum_us']):>14} {_us(m['with_copies_us']):>11} "
                     f"{_us(m['span_us']):>11} {_us(m['kernel_busy_us']):>11} {_num(m['kernels']):>8} "
                     f"{_num(m['copies']):>7} {m['gate_held']:>3}/{m['calls']:<3}  {said[:100]}")
        for way, n in (c.get("attributed_by") or {}).items():
            by[way] = by.get(way, 0) + n
        loose += c.get("unattributed", 0)
    lines.append(f"GPU activities placed in this tool's windows (calls, gates) by their launch: {by['launch']}, by "
                 f"their start time: {by['start time']}; outside every window (flush, refills, unwindowed calls): "
                 f"{loose}. gated = calls whose gate outlasted their launches (the medians use those)")
    return "\n".join(lines)


def _num(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:g}"


def cupti_medians(result: dict) -> dict[str, dict]:
    """{case label: medians} from a measurement (this tool's --json)."""
    try:
        return {str(c["case"]): dict(c["medians"]) for c in result["cases"]}
    except (KeyError, TypeError) as exc:
        raise ValueError(f"not a cupti_compare --json file ({type(exc).__name__}: {exc})") from None


# ---------------------------------------------------------------- the measurement (GPU)
def _spin_cycles_per_us(torch) -> float:
    """Clock cycles of torch.cuda._sleep's spin kernel per µs, timed with CUDA events."""
    torch.cuda._sleep(1000)
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    cycles = 20_000_000
    begin.record()
    torch.cuda._sleep(cycles)
    end.record()
    end.synchronize()
    return cycles / max(begin.elapsed_time(end) * 1e3, 1e-3)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Every selected benchmark case of the task, measured (see the module's docstring)."""
    import torch

    if not torch.cuda.is_available() or torch.version.cuda is None:
        raise ToolError("no NVIDIA GPU visible to PyTorch (torch.cuda.is_available() is False or not a CUDA build): "
                        "CUPTI needs one; use --load to compare an earlier measurement")
    sys.path.insert(0, str(ROOT))
    from harness.api import compat
    from harness.api import detect
    from harness.api import load_problem
    from harness.api import SpecError
    from harness.api import load_module

    try:
        problem = load_problem(args.task)
    except (SpecError, OSError) as exc:
        raise ToolError(f"task {args.task}: {exc}") from None
    cases = problem.spec.cases("benchmark", args.small)
    if args.case:
        bad = [i for i in args.case if not 0 <= i < len(cases)]
        if bad:
            raise ToolError(f"--case {bad[0]}: the task has benchmark cases 0 to {len(cases) - 1}")
        cases = [cases[i] for i in args.case]
    device = detect("cuda")
    compat.install()
    try:
        kernel = load_module(args.submission, "cupti_submission").custom_kernel
    except Exception as exc:  # noqa: BLE001 - one line, whatever the file raised
        raise ToolError(f"{args.submission}: import failed: {type(exc).__name__}: {str(exc)[:200]}") from None
    # the parent's flush (harness/parent/fence.py): 2x the L2 size, written then read
    flush = torch.zeros(max(2 * device.l2_bytes, 1 << 20) // 4 * 4, dtype=torch.uint8, device=device.torch_device)
    gate = not args.no_gate and hasattr(torch.cuda, "_sleep")
    per_us = _spin_cycles_per_us(torch) if gate else 0.0
    result = {"submission": str(args.submission), "device": device.describe(), "task": problem.spec.name,
              "calls": args.calls, "gate": gate, "flush_bytes": flush.numel(), "torch": torch.__version__,
              "cases": []}
    for case in cases:
        label = problem.label(case.args)
        began = time.monotonic()
        try:
            entry = _measure_case(problem, case, kernel, args, device.torch_device, flush, per_us)
        except Exception as exc:  # noqa: BLE001 - the case says why; the others still run
            entry = {"error": f"{type(exc).__name__}: {str(exc)[:300]}", "per_call": [], "medians": summarize([])}
            print(f"cupti_compare: {label}: {entry['error']}", file=sys.stderr)
        result["cases"].append({"case": label, "args": case.args, "seed": case.seed,
                                "seconds": round(time.monotonic() - began, 2), **entry})
        torch.cuda.empty_cache()
    return result


def _measure_case(problem: Any, case: Any, kernel: Any, args: argparse.Namespace, dev: Any, flush: Any,
                  per_us: float) -> dict[str, Any]:
    """One case: warm-up calls, then one profiler session over the calls; per_us: the gate's spin
    cycles per µs (0: no gate)."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    from harness.api import tensors

    words, sink = flush.view(torch.float32), torch.zeros((), dtype=torch.float32, device=dev)
    # the input sets the calls take in turn, and the buffers the calls read (refilled in place, as
    # the harness refills the inputs it shares with its worker)
    sources = [problem.generate(case.args, case.seed + k, dev) for k in range(args.inputs)]
    data = _clone(sources[0])
    shape, dtype = problem.layout(data)
    slot = torch.empty(shape, dtype=dtype, device=dev)  # the worker copies each output into its slot
    shared = [t for _, t in tensors(data)]
    fresh = [[t for _, t in tensors(s)] for s in sources]
    host: list[float] = []  # µs the host took to launch each call

    def prepare(i: int) -> None:
        """The fence's order: every input but the first refilled, L2 flushed (write + read), the
        first input (q) refilled, then the device synchronised."""
        source = fresh[i % len(fresh)]
        for dst, src in list(zip(shared, source))[1:]:
            dst.copy_(src)
        flush.zero_()
        torch.sum(words, 0, out=sink)
        shared[0].copy_(source[0])
        torch.cuda.synchronize()

    def one_call() -> None:
        start = time.perf_counter()
        out = kernel(data)
        slot.copy_(out)
        host.append((time.perf_counter() - start) * 1e6)
        torch.cuda.synchronize()

    def gate_cycles() -> int:
        """Twice the recent host launch time (+50 µs), so the call's launches are all queued before
        the gate kernel ends."""
        us = min(GATE_MAX_US, max(GATE_MIN_US, 2 * max(host[-4:]) + 50)) if host else GATE_MAX_US / 10
        return int(per_us * us)

    for i in range(args.warmup):
        prepare(i)
        one_call()
    with tempfile.TemporaryDirectory() as tmp:
        trace_path = Path(tmp) / "trace.json"
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            if per_us:
                with record_function(MARK + "probe"):  # the gate kernel alone: its name
                    torch.cuda._sleep(int(per_us * 10))
                    torch.cuda.synchronize()
            for i in range(2):  # host times under the profiler, outside every window: the first gate's size
                prepare(i)
                one_call()
            for i in range(args.calls):
                prepare(i)
                if per_us:
                    with record_function(f"{MARK}gate:{i}"):
                        torch.cuda._sleep(gate_cycles())
                with record_function(f"{MARK}call:{i}"):
                    one_call()
        prof.export_chrome_trace(str(trace_path))
        trace = json.loads(trace_path.read_text())
    measured = case_from_trace(trace, args.calls)
    check = "not checked"
    if not args.no_check:  # the last call's output against the task's check, on the inputs it read
        ok, message = problem.check(slot, problem.expected(data))
        check = ("pass: " if ok else "FAIL: ") + message
    return {"check": check, "host_us_median": median(host), **measured}


def _clone(tree: Any) -> Any:
    """A deep copy of the inputs' tensors (tuples, lists and dicts rebuilt, other values kept)."""
    if hasattr(tree, "clone") and callable(tree.clone):
        return tree.clone()
    if isinstance(tree, (tuple, list)):
        return type(tree)(_clone(x) for x in tree)
    if isinstance(tree, dict):
        return {k: _clone(v) for k, v in tree.items()}
    return tree


# ---------------------------------------------------------------- command line
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cupti_compare.py",
        description="Median GPU time per call of a submission on the task's benchmark cases, from a CUPTI trace "
                    "(torch.profiler), and its comparison with a leaderboard run's ranked times.",
        epilog="Examples (repo root): python3 lab/cupti_compare.py tests/honest/multi_kernel.py --json cupti.json "
               "--compare board.json;  python3 lab/cupti_compare.py --load cupti.json --compare board.json")
    p.add_argument("submission", nargs="?", help="the submission file (imported in this process: trusted files only)")
    p.add_argument("--task", default=str(ROOT / "task.yml"), help="task file (default: the repo's task.yml)")
    p.add_argument("--calls", type=int, default=20, help="profiled calls per case (default 20, at most 500)")
    p.add_argument("--warmup", type=int, default=3, help="unprofiled warm-up calls per case (default 3)")
    p.add_argument("--case", type=int, action="append", help="benchmark case index (repeatable; default: all)")
    p.add_argument("--small", action="store_true", help="the task's small (CPU) cases")
    p.add_argument("--inputs", type=int, default=2,
                   help="input sets per case, refilled in place in turn before each call (default 2)")
    p.add_argument("--no-gate", action="store_true",
                   help="no spin kernel ahead of each call (the span then includes launch gaps)")
    p.add_argument("--no-check", action="store_true", help="skip checking the last call's output")
    p.add_argument("--json", metavar="PATH", help="write the measurement (per-call numbers and medians) here")
    p.add_argument("--load", metavar="PATH", help="read an earlier --json measurement instead of measuring")
    p.add_argument("--compare", metavar="LEADERBOARD.json", help="a leaderboard --json export to compare with")
    p.add_argument("--name", help="the submission's name in the export (default: the file's name)")
    p.add_argument("--tolerance", type=float, default=TOLERANCE, help="flag threshold (default 0.05 = 5%%)")
    return p


def _read_json(path: str, what: str) -> Any:
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ToolError(f"{what} {path}: no such file") from None
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ToolError(f"{what} {path}: not readable JSON ({type(exc).__name__})") from None


def run(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(argv)
    if args.load and args.submission:
        raise ToolError("give a submission file to measure, or --load an earlier measurement, not both")
    if not args.load and not args.submission:
        raise ToolError("give a submission file to measure (or --load an earlier --json measurement)")
    if not 1 <= args.calls <= 500 or not 0 <= args.warmup <= 100 or not 1 <= args.inputs <= 8:
        raise ToolError("--calls must be 1 to 500, --warmup 0 to 100, --inputs 1 to 8")
    if not 0 < args.tolerance < 1 or math.isnan(args.tolerance):
        raise ToolError("--tolerance must be between 0 and 1")
    if args.submission and not Path(args.submission).is_file():
        raise ToolError(f"{args.submission}: no such file")
    export = _read_json(args.compare, "--compare") if args.compare else None
    for path in (args.json,):
        if path and not Path(path).resolve().parent.is_dir():
            raise ToolError(f"--json {path}: the folder {Path(path).resolve().parent} does not exist")
    if args.load:
        result = _read_json(args.load, "--load")
    else:
        result = measure(args)
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=2, default=str))
    try:
        medians = cupti_medians(result)
    except ValueError as exc:
        raise ToolError(f"--load {args.load}: {exc}") from None
    if not args.load:
        print(format_measurement(result))
    code = 0 if all(m.get("span_us") for m in medians.values()) and all(
        not str(c.get("check", "")).startswith("FAIL") for c in result.get("cases", [])) else 1
    if export is not None:
        try:
            name, verified, rows = ranked_rows(export, args.name or Path(str(result.get("submission", ""))).name)
        except ValueError as exc:
            raise ToolError(f"--compare {args.compare}: {exc}") from None
        compared = compare(medians, rows, args.tolerance)
        print(format_comparison(compared, name, verified))
        if any(r["flags"] for r in compared):
            code = 1
    return code


def main(argv: Optional[Sequence[str]] = None) -> int:
    try:
        return run(argv)
    except ToolError as exc:
        print(f"cupti_compare: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
