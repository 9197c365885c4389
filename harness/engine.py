"""Evaluating one submission: the trusted parent's loop over cases.

For every call the parent makes the inputs, computes the expected outputs, and judges what the
worker hands back; the worker only ever sees inputs. Timed calls get inputs from fresh secret
seeds (refilled in place, so the worker keeps its shared-memory mapping), and every timed output
is checked.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import secrets
import time
from pathlib import Path
from typing import Any, Callable, Optional

import torch

from harness.device import DeviceInfo, synchronize
from harness.problem import Problem
from harness.sandbox import Sandbox, WorkerFailure
from harness.spec import Case
from harness.timing import Stats, should_stop, summarize
from harness.verdict import Verdict, judge, tensors

MODES = ("test", "benchmark", "leaderboard", "profile")


@dataclasses.dataclass
class CaseResult:
    kind: str            # "test" or "benchmark"
    index: int
    name: str
    ok: bool
    reason: str = ""     # why it failed (or what it matched)
    device: Optional[Stats] = None  # device time per call (benchmark cases)
    host: Optional[Stats] = None    # host time per call
    profile: str = ""
    args: dict = dataclasses.field(default_factory=dict)  # the case's generate_input arguments


@dataclasses.dataclass
class SubmissionResult:
    path: str
    sha256: str
    ok: bool = True
    error: str = ""      # a failure that stopped the whole submission (import, crash, ...)
    cases: list[CaseResult] = dataclasses.field(default_factory=list)
    log: str = ""

    @property
    def name(self) -> str:
        return Path(self.path).name

    def geomean_us(self) -> Optional[float]:
        times = [c.device.median for c in self.cases if c.kind == "benchmark" and c.ok and c.device]
        if not self.ok or not times:
            return None
        return math.exp(sum(math.log(t) for t in times) / len(times)) * 1e6


# progress(event, **info): "case_start" (case), "call" (case, done, total), "case_end" (result)
Progress = Callable[..., None]


def _no_progress(event: str, **info: Any) -> None:
    pass


def evaluate(path: Path, problem: Problem, mode: str, device: DeviceInfo, small: bool,
             log_dir: Path, progress: Progress = _no_progress) -> SubmissionResult:
    result = SubmissionResult(str(path), hashlib.sha256(path.read_bytes()).hexdigest(),
                              log=str(log_dir / f"{path.stem}.log"))
    tests = problem.spec.cases("test", small)
    benchmarks = problem.spec.cases("benchmark", small)
    plan: list[tuple[Case, str]] = []
    if mode in ("test", "leaderboard"):
        plan += [(c, "test") for c in tests]
    if mode in ("benchmark", "leaderboard"):
        plan += [(c, "benchmark") for c in benchmarks]
    if mode == "profile":
        plan += [(c, "profile") for c in benchmarks]

    timeouts = problem.spec.timeouts
    try:
        box = Sandbox(path, device, Path(result.log), timeouts.startup)
    except WorkerFailure as exc:
        result.ok, result.error = False, f"{exc.kind}: {exc}"
        return result
    with box:
        for i, (case, action) in enumerate(plan):
            if action == "benchmark" and mode == "leaderboard" and not all(c.ok for c in result.cases):
                result.cases.append(_result(case, False, "not run: a test case failed"))
                continue
            progress("case_start", case=case, action=action)
            try:
                if action == "test":
                    outcome = _test_case(box, problem, case, device, timeouts.test_case)
                elif action == "benchmark":
                    outcome = _benchmark_case(box, problem, case, device, timeouts.benchmark_case, progress)
                else:
                    outcome = _profile_case(box, problem, case, device, timeouts.benchmark_case)
            except WorkerFailure as exc:
                outcome = _result(case, False, f"{exc.kind}: {exc}")
                if exc.fatal:
                    result.cases.append(outcome)
                    progress("case_end", result=outcome)
                    for later, later_action in plan[i + 1:]:
                        result.cases.append(_result(later, False,
                                                       "not run: the worker died on an earlier case"))
                    break
            result.cases.append(outcome)
            progress("case_end", result=outcome)
    result.ok = bool(result.cases) and all(c.ok for c in result.cases)
    return result


class _Inputs:
    """The case's input buffers, shared with the worker once and refilled in place per call."""

    def __init__(self, box: Sandbox, problem: Problem, case: Case, device: DeviceInfo):
        self.box, self.problem, self.case, self.device = box, problem, case, device
        self.data = problem.generate(case.args, case.seed, device.torch_device)
        self.pristine = _clone(self.data)
        self.expected = problem.expected(self.pristine)
        synchronize(device)
        box.send_inputs(self.data)

    def refill(self, seed: int) -> None:
        fresh = self.problem.generate(self.case.args, seed, self.device.torch_device)
        for (_, dst), (_, src) in zip(tensors(self.data), tensors(fresh)):
            dst.copy_(src)
        self.pristine = fresh
        self.expected = self.problem.expected(fresh)
        synchronize(self.device)

    def judge(self, output: torch.Tensor) -> Verdict:
        shape, dtype = self.problem.layout(self.pristine)
        return judge(output, shape, dtype, self.device.torch_device, self.pristine, self.data,
                     lambda out: self.problem.check(out, self.expected))


def _test_case(box: Sandbox, problem: Problem, case: Case, device: DeviceInfo, timeout: float) -> CaseResult:
    inputs = _Inputs(box, problem, case, device)
    output, _, _ = box.call(timed=False, timeout=timeout)
    verdict = inputs.judge(output)
    return _result(case, verdict.ok, verdict.reason)


def _benchmark_case(box: Sandbox, problem: Problem, case: Case, device: DeviceInfo, timeout: float,
                    progress: Progress) -> CaseResult:
    timing = problem.spec.timing
    deadline = time.monotonic() + timeout
    inputs = _Inputs(box, problem, case, device)
    for _ in range(timing.warmup_calls):  # compilation, autotuning; the first output is checked too
        output, _, _ = box.call(timed=False, timeout=deadline - time.monotonic())
        verdict = inputs.judge(output)
        if not verdict.ok:
            return _result(case, False, verdict.reason)
    device_times: list[float] = []
    host_times: list[float] = []
    start = time.monotonic()
    while not should_stop(device_times, time.monotonic() - start, timing.min_runs, timing.max_runs,
                          timing.max_seconds, timing.target_rel_ci):
        inputs.refill(secrets.randbits(31))
        output, device_s, host_s = box.call(timed=True, timeout=deadline - time.monotonic())
        verdict = inputs.judge(output)
        if not verdict.ok:
            return _result(case, False,
                              f"timed call {len(device_times) + 1}: {verdict.reason}")
        device_times.append(device_s)
        host_times.append(host_s)
        progress("call", case=case, done=len(device_times), total=timing.max_runs)
    return _result(case, True, verdict.reason,
                      device=summarize(device_times), host=summarize(host_times))


def _profile_case(box: Sandbox, problem: Problem, case: Case, device: DeviceInfo, timeout: float) -> CaseResult:
    inputs = _Inputs(box, problem, case, device)
    output, _, _ = box.call(timed=False, timeout=timeout)  # warm up (compile) outside the profile
    verdict = inputs.judge(output)
    if not verdict.ok:
        return _result(case, False, verdict.reason)
    table = box.profile(row_limit=12, timeout=timeout)
    return _result(case, True, verdict.reason, profile=table)


def _result(case: Case, ok: bool, reason: str, **stats: Any) -> CaseResult:
    return CaseResult(case.kind, case.index, case.name, ok, reason, args=case.args, **stats)


def _clone(tree: Any) -> Any:
    if isinstance(tree, torch.Tensor):
        return tree.clone()
    if isinstance(tree, tuple):
        return tuple(_clone(x) for x in tree)
    if isinstance(tree, list):
        return [_clone(x) for x in tree]
    if isinstance(tree, dict):
        return {k: _clone(v) for k, v in tree.items()}
    return tree
