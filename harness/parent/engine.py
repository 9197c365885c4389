"""Evaluating one submission: the trusted parent's loop over cases.

For every call the parent makes the inputs, computes the expected outputs, and judges what the
worker hands back; the worker only ever sees inputs. Timed calls get inputs from fresh secret
seeds (refilled in place, so the worker keeps its shared-memory mapping; on the CPU the refill is
part of the call's time, after the parent's clock started), and every timed output is checked.
"""

from __future__ import annotations

import dataclasses
import hashlib
import secrets
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional

from harness.parent import audit
from harness.config import RunContext
from harness.parent.case import CaseInputs, PhaseClock, TimedCalls, case_result, fence_figures, with_calibration
from harness.device import release_cached
from harness.parent.energy import BURST_MIN_PERIODS, EnergyBlock, burst_seconds, energy_per_call
from harness.parent.launch import WorkerProcess, log_path
from harness.results import CaseResult, SubmissionResult
from harness.parent.sandbox import Sandbox, WorkerFailure
from harness.parent.scan import SourceError, declared_variant, read_source, scan
from harness.task.spec import Case
from harness.timing import Stats, caught_up_warnings, noise_warnings, should_stop, summarize

FENCED = "verified: the parent's clock, fenced around each call"

# progress(event, **info): "case_start" (case), "call" (case, done, total), "case_end" (result)
Progress = Callable[..., None]


def _no_progress(event: str, **info: Any) -> None:
    pass


def evaluate(path: Path, ctx: RunContext, mode: str, progress: Progress = _no_progress,
             started: Optional[WorkerProcess] = None) -> SubmissionResult:
    """Every case of `mode` for one submission. `started`: its worker, if the caller started it
    early with `launch.start_worker`."""
    wall = time.perf_counter()
    try:
        source = read_source(path)
    except SourceError as e:  # (checked before the run too: harness/cli/__init__.py; this is the file as it is now)
        if started is not None:
            started.close()
        return SubmissionResult(str(path), "", ok=False, error=f"submission file {e}")
    result = SubmissionResult(str(path), hashlib.sha256(source).hexdigest(),
                              log=str(log_path(ctx.log_dir, path)),
                              variant=declared_variant(path, ctx.problem.spec.kv_formats, source))
    clock = PhaseClock(result.phases)
    steps = plan(ctx.problem.spec, mode, ctx.small)
    box = clock.timed("worker start", Sandbox, path, ctx.device, Path(result.log), ctx.problem.spec.timeouts.startup,
                      started, ctx.sandbox, ctx.private, fence=ctx.fence == "fenced", shared=ctx.shared)
    result.sandboxed = box.sandboxed
    result.audit = ctx.fence if ctx.fence != "fenced" else "unverified: the worker did not start"
    auditor: list = []  # the audit's worker, started as the tests begin, idle before any timed call (leaderboard mode)
    finished = ended = False
    try:
        # The worker imports torch and the submission meanwhile; the scan runs in the parent.
        result.scan = clock.timed("static scan", scan, path)
        first = CaseInputs(ctx, steps[0][0], clock) if steps else None  # made while the worker starts
        try:
            clock.timed("worker start", box.wait_ready)
        except WorkerFailure as exc:
            result.ok, result.error = False, f"{exc.kind}: {exc}"
            return result
        if ctx.fence == "fenced":
            result.audit = _fenced_audit(box)
        ended = _run_steps(path, ctx, mode, steps, first, box, result, progress, clock, auditor)
        result.ok = bool(result.cases) and all(c.ok for c in result.cases)
        if mode == "leaderboard" and result.ok and box.fence is None:  # unfenced: the profiler's audit
            auditing = auditor.pop() if auditor else None
            if auditing is not None:  # its compiled kernels are copied (its folder ends with it), then
                audit.share_kernels(box.worker, auditing)  # the timed worker ends: none left to help
                box.close()                                # the audited one
            note = result.audit
            clock.timed("audit", audit.audit_submission, path, ctx, result, auditing)
            result.audit = note if result.audit.startswith("not audited") else f"{note}; {result.audit}"
        finished = True
        return result
    finally:
        box.close()  # (removes its scratch: the worker owns it)
        for unused in auditor:  # started, never used (a test failed): ended at once
            unused.worker.close(grace=0)
            audit.discard_report(unused.worker.scratch)
        # the companion's verdict is for a file that answered wrong; one that hung or crashed is run once
        if finished and not ended and ctx.problem.spec.companion and not result.error and any(
                c.kind == "test" and not c.ok for c in result.cases):
            result.companion = clock.timed("companion", _companion_verdict, path, ctx)
        result.phases["total"] = time.perf_counter() - wall


def _companion_verdict(path: Path, ctx: RunContext) -> str:
    """One line: the submission's test verdict on the task's companion (task.yml `companion`, for
    example the competition's own cases), for a file that failed this task's tests."""
    from harness.task.problem import load_problem
    from harness.task.spec import SpecError

    companion = (Path(ctx.problem.spec.path).parent / ctx.problem.spec.companion).resolve()
    own = sys.modules.get("reference")
    try:
        problem = load_problem(companion)
    except (SpecError, OSError) as exc:
        return f"companion task not loaded: {exc}"
    finally:  # loading a task makes its reference.py the `reference` module: this run's stays
        if own is not None:
            sys.modules["reference"] = own
    own = ctx.problem.spec.timeouts  # no longer than this run's (--timeout)
    limits = {k: min(v, getattr(own, k)) for k, v in dataclasses.asdict(problem.spec.timeouts).items()}
    spec = dataclasses.replace(problem.spec, companion="", timeouts=dataclasses.replace(problem.spec.timeouts, **limits))
    other = dataclasses.replace(ctx, config=dataclasses.replace(ctx.config, logs=str(ctx.log_dir / "companion")),
                                problem=dataclasses.replace(problem, spec=spec))
    result = evaluate(path, other, "test")
    passed = sum(c.ok for c in result.cases)
    name = problem.spec.name
    if result.ok:
        lax = _companion_lax(companion, other)
        return f"passes {name}'s {passed} test case(s) (--task {companion.parent.name} ranks it there)" + (
            f"; note: its {lax}" if lax else "")
    why = result.error or next((f"{ctx.problem.label(c.args)}: {c.reason}" for c in result.cases if not c.ok), "")
    return f"fails {name}'s tests too ({passed} of {len(result.cases)} pass; {why[:200]})"


_COMPANION_LAX: dict = {}  # (companion task, its check, device, small) -> lax_check line, once per process


def _companion_lax(companion: Path, ctx: RunContext) -> str:
    """selftest.lax_check's line for the companion task (ctx: the companion's context)."""
    key = (companion, str(ctx.problem.check_policy), ctx.device, ctx.small)
    if key not in _COMPANION_LAX:
        from harness.task.selftest import lax_check

        try:
            _COMPANION_LAX[key] = lax_check(ctx.problem, ctx.device, ctx.small)
        except Exception as exc:  # noqa: BLE001 - a note that says less beats a lost result
            return f"check not tried ({type(exc).__name__})"
    return _COMPANION_LAX[key]


def _fenced_audit(box: Sandbox) -> str:
    """What establishes a fenced run's timings for one file. Outside the sandbox an earlier file could
    have rewritten the harness's worker-side code (the null calls that calibrate the fence
    included), so those numbers are not called verified."""
    if box.fence is None:
        return f"unverified: {box.fence_note} (the worker's own events)"
    if not box.sandboxed:
        return "unverified: fenced, but the worker ran outside the sandbox"
    return FENCED


def _run_steps(path: Path, ctx: RunContext, mode: str, steps: list, first: Optional[CaseInputs], box: Sandbox,
               result: SubmissionResult, progress: Progress, clock: PhaseClock, auditor: list) -> bool:
    """The cases, one after the other, into `result.cases`; a worker that dies (a timeout, a crash)
    ends them. Whether one did."""
    for i, (case, action) in enumerate(steps):
        if action == "benchmark" and mode == "leaderboard" and not all(c.ok for c in result.cases):
            result.cases.append(case_result(case, False, "not run: a test case failed"))
            continue
        if mode == "leaderboard" and i == 0 and box.fence is None:  # the audit's worker starts while the tests run...
            auditor.extend(filter(None, [audit.start(path, ctx)]))
        if action == "benchmark" and auditor and not auditor[0].settled:
            # ...and is idle before the first timed call: starting beside timed calls (CUDA context,
            # profiler injection) slowed them (H200: a 50 µs median tail after the end event, honest
            # triton_bf16 rejected). A start that failed is reported by the audit.
            clock.timed("audit wait", auditor[0].settle)
        progress("case_start", case=case, action=action)
        try:
            if i:
                inputs = None  # the last case's buffers go before the next one's are made
                release_cached(ctx.device)
            inputs = first if i == 0 else CaseInputs(ctx, case, clock)
            inputs.share(box)
            if action == "test":
                outcome = _test_case(inputs)
            elif action == "benchmark":
                outcome = _benchmark_case(inputs, result.variant, progress)
            else:
                outcome = _profile_case(inputs)
        except WorkerFailure as exc:
            outcome = case_result(case, False, f"{exc.kind}: {exc}")
            if exc.fatal:
                result.cases.append(outcome)
                progress("case_end", result=outcome)
                result.cases += [case_result(later, False, "not run: the worker died on an earlier case")
                                 for later, _ in steps[i + 1:]]
                return True
        result.cases.append(outcome)
        progress("case_end", result=outcome)
    return False


def plan(spec: Any, mode: str, small: bool) -> list[tuple[Case, str]]:
    """The (case, action) steps of `mode`: tests, benchmarks, both (leaderboard) or profiles."""
    tests, benchmarks = spec.cases("test", small), spec.cases("benchmark", small)
    return ([(c, "test") for c in tests] if mode in ("test", "leaderboard") else []) + \
        ([(c, "benchmark") for c in benchmarks] if mode in ("benchmark", "leaderboard") else []) + \
        ([(c, "profile") for c in benchmarks] if mode == "profile" else [])


def _test_case(inputs: CaseInputs) -> CaseResult:
    case = inputs.case
    verdict, _ = inputs.call(timed=False, deadline=time.monotonic() + inputs.ctx.problem.spec.timeouts.test_case)
    return case_result(case, verdict.ok, verdict.reason)


def _benchmark_case(inputs: CaseInputs, variant: str, progress: Progress) -> CaseResult:
    ctx, case = inputs.ctx, inputs.case
    timing = ctx.problem.spec.timing
    deadline = time.monotonic() + ctx.problem.spec.timeouts.benchmark_case
    moved = ctx.problem.bytes_moved(inputs.pristine).get(variant)
    failed, method_notes = _warm_up(inputs, deadline)
    if failed:
        return case_result(case, False, failed)
    watch = ctx.watch if ctx.watch is not None and ctx.watch.available else None
    calls = TimedCalls(inputs, ctx.timed_seeds(case), deadline, progress, watch.case() if watch else None)
    start = time.monotonic()
    failed = calls.take(lambda: not should_stop(calls.device, time.monotonic() - start, timing.min_runs,
                                                timing.max_runs, timing.max_seconds, timing.target_rel_ci))
    issue = failed or calls.tail_issue()
    if issue and not failed and len(calls.device) < timing.max_runs:
        # A case's first calls can leave long synchronizes (H200, --budget 0.05: honest median tails
        # of 51-59 µs over 10 calls, 12-20 µs over 100): up to max_runs calls confirm a tail first.
        failed = calls.take(lambda: len(calls.device) < timing.max_runs and calls.room())
        issue = failed or calls.tail_issue()
    elapsed = time.monotonic() - start
    if not issue and calls.may_watch():
        issue = calls.watch()
    clocks, clock_warnings = calls.gauges.finish() if calls.gauges else ({}, ())
    diagnostics: dict[str, Any] = {}
    if not issue and inputs.box.fence is not None:  # the worker's own events, beside the fenced number
        issue, calls.kernel = _method_calls(inputs, "events", calls.next_seed, deadline)
    if ctx.diagnostics and not issue:
        issue, diagnostics = _diagnostics(inputs, calls.next_seed, deadline)
    device = summarize(calls.device) if not issue else None
    energy: dict[str, Any] = {}
    if device and ctx.energy and watch is not None and watch.energy() is not None:
        # (the CPU's ranked number is the parent's round trip, refill and messages included: no floor)
        issue, energy = inputs.clock.timed("energy", _energy, inputs, watch,
                                           device.median if ctx.device.is_gpu else None, deadline)
    if issue or not device:
        return case_result(case, False, issue, clocks=clocks, warnings=clock_warnings)
    return case_result(case, True, calls.matched, device=with_calibration(device, inputs), host=summarize(calls.host),
                       samples=tuple(calls.device), caught_up=tuple(calls.caught_up),
                       kernel=summarize(calls.kernel) if calls.kernel else None, **fence_figures(inputs),
                       tail=summarize(calls.tails),
                       bytes=moved, clocks=clocks, **energy, **diagnostics,
                       warnings=method_notes + noise_warnings(calls.device, device, elapsed, timing.max_seconds,
                                                              timing.target_rel_ci,
                                                              calls.caught_up if ctx.device.is_gpu else ())
                       + caught_up_warnings(calls.caught_up, calls.device) + clock_warnings)


def _warm_up(inputs: CaseInputs, deadline: float) -> tuple[Optional[str], tuple[str, ...]]:
    """Warm-up calls (compilation, autotuning), a secret number of extra ones so a submission cannot
    count its way to the first timed call, every output checked; then, with --graph, the capture.
    (why the case failed or None, notes on how its calls are timed)."""
    ctx = inputs.ctx
    for _ in range(ctx.problem.spec.timing.warmup_calls + secrets.randbelow(3)):
        verdict, _ = inputs.call(timed=False, deadline=deadline)
        if not verdict.ok:
            return f"warm-up call: {verdict.reason}", ()
    if ctx.graph and ctx.device.is_gpu:
        captured, why = inputs.box.capture(timeout=max(1.0, deadline - time.monotonic()))
        if not captured:
            return None, (f"--graph: not capturable ({why}); timed plain calls",)
    return None, ()


DIAGNOSTIC_CALLS = 5  # --diagnostics, and a fenced run's `events µs`: calls per case and method


def _method_calls(inputs: CaseInputs, method: str, next_seed: Callable[[], int],
                  deadline: float) -> tuple[Optional[str], list[float]]:
    """DIAGNOSTIC_CALLS calls timed by the worker's `method` (harness/worker/timer.py, `diagnose`), each
    on fresh inputs and judged like any call; (the first failure's reason or None, their times)."""
    samples = []
    for n in range(DIAGNOSTIC_CALLS):
        inputs.refill(next_seed())
        verdict, timing = inputs.call(timed=True, deadline=deadline, method=method)
        if not verdict.ok:
            return f"{method}-timed call {n + 1}: {verdict.reason}", []
        samples.append(timing.device_s)
    return None, samples


def _diagnostics(inputs: CaseInputs, next_seed: Callable[[], int],
                 deadline: float) -> tuple[Optional[str], dict[str, Optional[Stats]]]:
    """--diagnostics: calls timed the competition's way, then isolated ones (`_method_calls`); (the
    first failure's reason or None, CaseResult's `competition` and `isolated`). The worker times
    them: diagnostics beside the ranked number."""
    found = {}
    for method in ("competition", "isolated"):
        failed, found[method] = _method_calls(inputs, method, next_seed, deadline)
        if failed:
            return f"{failed} (--diagnostics)", {}
    return None, {method: summarize(samples) for method, samples in found.items()}


def _energy(inputs: CaseInputs, meter: Any, ranked_s: Optional[float],
            deadline: float) -> tuple[Optional[str], dict[str, Any]]:
    """--energy: the counter read around a burst of calls back to back on the case's last inputs, the
    last output judged (harness/parent/gpuwatch.py); (the burst's failure or None, CaseResult's energy
    fields)."""
    period = meter.counter_period()
    seconds = min(burst_seconds(period), deadline - time.monotonic() - 2 * period - 1)
    if seconds < BURST_MIN_PERIODS * period:
        return None, {"energy_note": f"not measured: the energy counter moves every {period * 1e3:.0f} ms, too "
                                     f"seldom for a burst of at most {seconds:.1f} s"}
    readings = [meter.energy()]
    verdict, timing = inputs.call(timed=True, deadline=deadline, method="burst", burst_s=seconds,
                                  replied=lambda: readings.append(meter.energy()))
    if not verdict.ok:
        return f"energy burst of {timing.calls} calls: {verdict.reason} (--energy)", {}
    if None in readings:
        return None, {"energy_note": "not measured: the energy counter did not answer"}
    joules, bound, note = energy_per_call(EnergyBlock.between(*readings), timing.calls, period, ranked_s,
                                          meter.idle_watts())
    return None, {"energy_j": joules, "energy_err_j": bound, "energy_note": note}


def _profile_case(inputs: CaseInputs) -> CaseResult:
    ctx, case, box = inputs.ctx, inputs.case, inputs.box
    timeout = ctx.problem.spec.timeouts.benchmark_case
    verdict, _ = inputs.call(timed=False, deadline=time.monotonic() + timeout)  # warm up outside the profile
    if not verdict.ok:
        return case_result(case, False, verdict.reason)
    table = box.profile(row_limit=12, timeout=timeout)
    return case_result(case, True, verdict.reason, profile=table)
