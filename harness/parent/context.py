"""A run's context in this process, from its configuration (harness/config.py): the task loaded, the
device detected, the run's MPS daemon started where timed GPU calls will be fenced, the GPU's gauges."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from harness.config import RunConfig, RunContext
from harness.device import detect
from harness.parent import mps
from harness.parent.gpuwatch import open_watch
from harness.results import CPU_TIMING
from harness.task.problem import configured, load_problem


def run_context(config: RunConfig) -> RunContext:
    """The engine's RunContext for this configuration, in this process: the task loaded, the
    device detected, how timed calls are measured, the GPU's gauges."""
    problem = configured(load_problem(config.task), config.check, config.budget, config.timeout)
    if config.cases is not None:
        cases = [dict(c) for c in config.cases]
        cpu = dataclasses.replace(problem.spec.cpu, tests=cases, benchmarks=cases)
        spec = dataclasses.replace(problem.spec, tests=cases, benchmarks=cases, cpu=cpu)
        problem = dataclasses.replace(problem, spec=spec)
    fence = fence_plan(config)  # (before this process's first CUDA context: an MPS client from the start)
    device = detect(config.device)
    if not device.is_gpu:
        fence = CPU_TIMING
    elif device.vendor != "nvidia" and fence == "fenced":
        fence = f"unverified: no fence on {device.vendor} GPUs yet (the worker's own events)"
    return RunContext(problem, device, config, fence=fence, watch=_watch(config, device))


def _watch(config: RunConfig, device: Any) -> Any:
    """The GPU's gauges around benchmark cases (harness/parent/gpuwatch.py), for timed modes on a GPU."""
    timed = config.mode in ("benchmark", "leaderboard")
    watch = open_watch(device.vendor, device.is_gpu) if timed else None
    if config.energy and watch is not None and watch.available and watch.energy() is not None:
        watch.counter_period()  # (--energy: now, before any worker runs, so its watts are the idle GPU's)
    return watch


def fence_plan(config: RunConfig) -> str:
    """"fenced" where timed GPU calls will be measured by the parent (its MPS daemon started
    now, harness/parent/mps.py), else "unverified: why" (one line, shown and stored with the results)."""
    if config.mode not in ("benchmark", "leaderboard"):
        return "unverified: no timed calls"
    if config.device == "cpu":
        return CPU_TIMING
    if config.no_audit:
        return "unverified: --no-audit (the worker's own events)"
    why = mps.start()
    if why is None:
        separate_queues()
    return "fenced" if why is None else f"unverified: {why} (the worker's own events)"


QUEUES = "CUDA_DEVICE_MAX_CONNECTIONS"


def separate_queues() -> None:
    """The fence's streams (harness/parent/fence.py) wait on flags that its other streams write: where
    they share one hardware queue, a wait holds up the write it waits for, for good (a probe of the
    fence's pattern hung at 1 connection on the H100, BENCHMARKS.md). So a fenced run leaves a CUDA
    default of 8 queues or more as it is, and drops a smaller setting before its first CUDA context
    (its workers inherit that)."""
    value = os.environ.get(QUEUES)
    if value is not None and not (value.strip().isdigit() and int(value) >= 8):
        del os.environ[QUEUES]
