"""One case as the parent holds it, in a run's context (harness/config.py RunContext): the case's
inputs shared with the worker and refilled per call, each call judged, and the clock that adds up
where the parent's wall time went. The engine (harness/parent/engine.py) drives cases through it;
the audit (harness/parent/audit.py) replays them under the profiler with it.
"""

from __future__ import annotations

import dataclasses
import math
import secrets
import time
from typing import Any, Callable, Optional

import torch

from harness.config import RunContext
from harness.device import synchronize
from harness.parent.fence import first_input
from harness.results import CaseResult
from harness.parent.sandbox import OutputLayout, Sandbox
from harness.task.spec import Case
from harness.timing import CallTiming, Stats, tail_problem, timing_problem
from harness.task.verdict import Verdict, judge, tensors


class PhaseClock:
    """Adds up the parent's wall time per phase of an evaluation (shown and exported, so a slow
    run says where its time went)."""

    def __init__(self, phases: dict[str, float]):
        self.phases = phases

    def add(self, name: str, seconds: float) -> None:
        self.phases[name] = self.phases.get(name, 0.0) + seconds

    def timed(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            self.add(name, time.perf_counter() - start)


class CaseInputs:
    """The case's input buffers, shared with the worker once and refilled in place per timed call (on
    the CPU inside the call's time: harness/parent/sandbox.py, `Sandbox.call`)."""

    def __init__(self, ctx: RunContext, case: Case, clock: PhaseClock):
        self.ctx, self.case, self.clock = ctx, case, clock
        self.pristine = self._generate(ctx.case_seed(case))  # the parent's own copy; the worker sees `data`
        self._expect(self.pristine)
        self.floor_s = ctx.floor_s(self.pristine)
        self.layout = ctx.problem.layout(self.pristine)
        self.fresh: Any = None  # new inputs not yet copied in (on the CPU: by the next call)

    def share(self, box: Sandbox) -> None:
        """Copy the inputs into memory shared with the worker (it keeps it; refills happen in place)."""
        self.box = box
        self.data = self.clock.timed("inputs", box.share_inputs, self.pristine, *self.layout)

    def _generate(self, seed: int) -> Any:
        return self.clock.timed("inputs", self.ctx.problem.generate, self.case.args, seed, self.ctx.device.torch_device)

    def _expect(self, data: Any) -> None:
        self.expected = self.clock.timed("reference", self.ctx.problem.expected, data)
        self.clock.timed("reference", synchronize, self.ctx.device)

    def refill(self, seed: int) -> None:
        """New inputs: on a GPU copied in place now, on the CPU by the next call once its clock runs. Their
        expected output is computed after the call, so the worker has no idle moment with the new
        inputs before the call starts (nothing to precompute in)."""
        self.fresh = self._generate(seed)
        self.pristine, self.expected = self.fresh, None
        if self.ctx.device.is_gpu and self.box.fence is None:  # (fenced: copied in by the fence, harness/parent/fence.py)
            self._copy_in()
            synchronize(self.ctx.device)

    def _copy_in(self) -> None:
        """The pending new inputs into the shared ones, the first input (q) last: no way to the
        answer starts before the copy ends."""
        pairs = list(zip(tensors(self.data), tensors(self.fresh)))
        for (_, dst), (_, src) in pairs[1:] + pairs[:1]:
            dst.copy_(src)
        self.fresh = None

    def call(self, timed: bool, deadline: float, mark: Optional[str] = None,
             method: Optional[str] = None, watch_s: Optional[float] = None,
             burst_s: float = 0.0, replied: Optional[Callable[[], Any]] = None) -> tuple[Verdict, CallTiming]:
        """One call, judged: the output's verdict, then the timing's integrity. `method`: a diagnostic
        call (--diagnostics; --energy's "burst" of calls for `burst_s`, `replied()` run as soon as
        the worker answered, before the judging), its output judged, its time the worker's and not held
        to the floor.
        `watch_s`: a fenced timed call whose DONE the fence's watcher checks, waiting for it at most that
        long (a check, not a sample)."""
        # (a call that fails before its refill leaves the inputs pending for the next call)
        timeout = max(1.0, deadline - time.monotonic())
        if timed and not method and self.box.fence is not None and self.fresh is not None:
            rest, first = first_input(self.data, self.fresh, tensors)

            def refill_rest() -> None:
                for dst, src in rest:
                    dst.copy_(src)

            output, timing = self.clock.timed("calls", self.box.fenced_call, refill_rest, first, timeout,
                                              watch_s=watch_s)
            self.fresh = None
        else:
            # (warm-ups, tests and diagnostics apart from the timed calls: a case's first call also
            # compiles the submission's kernels)
            phase = "calls" if timed and not method else "untimed calls"
            output, timing = self.clock.timed(phase, self.box.call, timed=timed, timeout=timeout, mark=mark,
                                              refill=self._copy_in if self.fresh is not None else None,
                                              **({"method": method, "burst_s": burst_s} if method else {}))
            if replied is not None:
                replied()
        if method:
            timed = False  # (a diagnostic: no timed device time, no floor, not the last timed output)
        if timed:
            self.clock.add("timed device", timing.device_s)
        if self.expected is None:
            self._expect(self.pristine)
        problem = self.ctx.problem
        shape, dtype = self.layout
        if isinstance(output, OutputLayout):
            return Verdict(False, layout_problem(output, shape, dtype, self.ctx.device.torch_device)), timing
        verdict = self.clock.timed("check", judge, output, shape, dtype, self.ctx.device.torch_device, self.pristine,
                                   self.data, lambda out: problem.check(out, self.expected))
        if verdict.ok and not method:
            issue = timing_problem(timing, self.floor_s if timed else None)
            if issue:
                verdict = Verdict(False, issue)
        return verdict, timing


def layout_problem(output: OutputLayout, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> str:
    """Why an output that did not fit the slot is wrong, in the words `judge` uses."""
    if tuple(output.shape) != tuple(shape):
        return f"output shape {tuple(output.shape)}, expected {tuple(shape)}"
    if output.dtype != str(dtype).removeprefix("torch."):
        return f"output dtype torch.{output.dtype}, expected {dtype}"
    return f"output on {output.device}, expected on {device.type}"


def case_result(case: Case, ok: bool, reason: str, **stats: Any) -> CaseResult:
    return CaseResult(case.kind, case.index, case.name, ok, reason, args=case.args, **stats)


def clone_tree(tree: Any) -> Any:
    if isinstance(tree, torch.Tensor):
        return tree.clone()
    if isinstance(tree, tuple):
        return tuple(clone_tree(x) for x in tree)
    if isinstance(tree, list):
        return [clone_tree(x) for x in tree]
    if isinstance(tree, dict):
        return {k: clone_tree(v) for k, v in tree.items()}
    return tree


def _fenced_bytes(inputs: CaseInputs) -> tuple[int, int]:
    """(the first input's bytes, the output's): the sizes the fence's cost is a line in."""
    first = next(iter(tensors(inputs.data)))[1]
    shape, dtype = inputs.layout
    return first.numel() * first.element_size(), math.prod(shape) * dtype.itemsize


def with_calibration(device: Stats, inputs: CaseInputs) -> Stats:
    """Fenced, the ranked median's 95% interval with the subtracted cost's own (its null calls' median
    is an estimate whose error every reading of the run shares), in quadrature; what `--compare`,
    `--replay` and the exports read. The case's stopping rule and noise warnings keep the calls'
    own interval: more calls do not shrink the calibration's."""
    fence = inputs.box.fence
    if fence is None or not device.median > 0:
        return device
    half = fence.cost_ci_s(sum(_fenced_bytes(inputs)))
    return dataclasses.replace(device, ci_rel=math.hypot(device.ci_rel, half / device.median))


def fence_figures(inputs: CaseInputs) -> dict[str, Optional[float]]:
    """Fenced, the fence's figures for the case's sizes: `slot_copy_s`, what the output's copy into the
    slot costs inside the ranked time, and `fence_s`, what is subtracted from a reading (both
    from the null calls); {} unfenced."""
    fence = inputs.box.fence
    if fence is None:
        return {}
    first_bytes, out_bytes = _fenced_bytes(inputs)
    return {"slot_copy_s": fence.copy_s(out_bytes), "fence_s": fence.cost_s(first_bytes + out_bytes)}


# Fenced, about one timed call in WATCH_ONE_IN (drawn in secret, at least one a case) is watched: the
# fence's watcher checks that its DONE came after its output was final (harness/parent/fence.py). A
# watched call is judged like any other and never timed: the watcher's warp holds an SM through it.
# The watcher waits for DONE WATCH_BOUND times the slowest call so far (at least WATCH_MIN_S; before
# any, WATCH_FIRST_S): a call that cannot start beside it then goes on once it leaves, and fails.
WATCH_ONE_IN = 6
WATCH_BOUND, WATCH_MIN_S, WATCH_FIRST_S = 20, 0.02, 1.0


class TimedCalls:
    """A case's timed calls so far, each on fresh inputs from a secret seed and its output checked:
    per call the ranked time, the host's launch time, the sync tail, whether the GPU waited for its
    launches, and (fenced) the worker's own events, a diagnostic beside the ranked time; `watched`
    holds the parent's times of the calls checked by the fence's watcher instead of timed (not
    samples)."""

    def __init__(self, inputs: CaseInputs, next_seed: Callable[[], int], deadline: float, progress: Callable[..., None],
                 gauges: Any):
        self.inputs, self.next_seed, self.deadline, self.progress, self.gauges = (
            inputs, next_seed, deadline, progress, gauges)
        self.device: list[float] = []
        self.host: list[float] = []
        self.tails: list[float] = []
        self.caught_up: list[bool] = []
        self.kernel: list[float] = []
        self.matched = ""  # the last output's verdict text ("matches kv=..., rel L2 ...")
        fence = inputs.box.fence
        # (watched calls apart from the timed ones, unless the fence watches every call itself)
        self.watching = getattr(fence, "watcher", None) is not None and not getattr(fence, "watch_all", False)
        self.watched: list[float] = []

    def take(self, more: Callable[[], bool]) -> Optional[str]:
        """Timed calls while `more()`; the first failure's reason, or None."""
        inputs = self.inputs
        while more():
            if self.watching and secrets.randbelow(WATCH_ONE_IN) == 0:
                failed = self.watch()
                if failed:
                    return failed
                continue
            inputs.refill(self.next_seed())
            verdict, timing = inputs.call(timed=True, deadline=self.deadline)
            if not verdict.ok:
                return f"timed call {len(self.device) + 1}: {verdict.reason}"
            self.device.append(timing.device_s)
            self.host.append(timing.host_s)
            self.tails.append(timing.tail_s)
            self.caught_up.append(timing.caught_up)
            self.progress("call", case=inputs.case, done=len(self.device),
                          total=inputs.ctx.problem.spec.timing.max_runs)
            self.matched = verdict.reason
            if self.gauges:
                self.gauges.tick()
        return None

    def watch(self) -> Optional[str]:
        """One watched call (fresh inputs, judged, not timed); the failure's reason or None."""
        self.inputs.refill(self.next_seed())
        bound = max(WATCH_MIN_S, WATCH_BOUND * max(self.device + self.watched)) if self.device else WATCH_FIRST_S
        verdict, timing = self.inputs.call(timed=True, deadline=self.deadline, watch_s=bound)
        if not verdict.ok:
            return f"watched call {len(self.watched) + 1}: {verdict.reason}"
        self.watched.append(timing.device_s)
        return None

    def room(self) -> bool:
        """Whether one more call fits before the deadline (three times the slowest so far, and a second)."""
        return self.deadline - time.monotonic() > 1 + 3 * max(self.host + self.device, default=0.0)

    def may_watch(self) -> bool:
        """Whether a watched call is owed (none yet in this case) and fits before the deadline."""
        return self.watching and not self.watched and self.room()

    def tail_issue(self) -> Optional[str]:
        # Fenced, what the call finished is judged on the parent's snapshot, and work left running
        # after DONE meets the next call's census: the worker's own tail says nothing of the number.
        return None if self.inputs.box.fence is not None else tail_problem(self.tails, self.device)
