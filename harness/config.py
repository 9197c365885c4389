"""A run's configuration: one frozen, picklable value built once (from the command line, or from
popcorn's arguments) that the sequential loop, the pool's evaluators, Ray tasks and popcorn all take
as it is. `context()` turns it into the engine's RunContext (the loaded task, the detected device)
in whichever process evaluates.
"""

from __future__ import annotations

import dataclasses
import secrets
from pathlib import Path
from typing import Any, Mapping, Optional

from harness.results import CPU_TIMING  # (what a CPU run's results say times them)


# A task's timeouts (task.yml `timeouts`, harness/spec.py) in words.
TIMEOUT_NAMES = {"startup": "worker start", "test_case": "test case", "benchmark_case": "benchmark case"}


def timeouts_text(limits: Mapping[str, float]) -> str:
    """A task's timeouts as a run and --help show them: "worker start 120 s, test case 120 s, ..."."""
    return ", ".join(f"{words} {limits[key]:g} s" for key, words in TIMEOUT_NAMES.items())


class UsageError(Exception):
    """Bad flags or input, found before or while a run starts: one line and exit code 2 (harness/cli.py)."""


@dataclasses.dataclass(frozen=True)
class RunConfig:
    mode: str                          # test | benchmark | leaderboard | profile
    task: str                          # task.yml path (reference.py beside it)
    device: Optional[str] = None       # "cpu", "cuda" or None (detect)
    small: bool = False                # the task's small shapes
    log_dir: str = "results/logs"
    secret: Optional[int] = dataclasses.field(default_factory=lambda: secrets.randbits(63))  # None: public seeds
    bandwidth: Optional[float] = None  # measured copy bandwidth, bytes/s (GPU runs)
    graph: bool = False                # time CUDA-graph replays
    policy: Optional[str] = None       # check policy (None: the task's default)
    max_seconds: Optional[float] = None  # time budget per benchmark case (None: the task's)
    sandbox: str = "auto"              # auto | require | off (harness/launch.py)
    private: tuple[str, ...] = ()      # paths no worker may see (the database, the logs)
    shared: tuple[str, ...] = ()       # paths every worker may read besides its submission (--share)
    audit: bool = True                 # the profiler's audit of GPU timings (harness/audit.py)
    cases: Optional[tuple[dict[str, Any], ...]] = None  # run these instead of the task's (popcorn's TESTFILE, --shape)
    timeout: Optional[float] = None    # caps every timeout of the task (--timeout)
    energy: bool = False               # --energy: joules per call from the GPU's energy counter (harness/gpuwatch.py)
    diagnostics: bool = False          # --diagnostics: the competition's timing and isolated calls beside the ranked one

    def context(self):
        """The engine's RunContext for this configuration, in this process."""
        from harness.device import detect
        from harness.case import RunContext
        from harness.problem import configured, load_problem

        problem = configured(load_problem(self.task), self.policy, self.max_seconds, self.timeout)
        if self.cases is not None:
            cases = [dict(c) for c in self.cases]
            cpu = dataclasses.replace(problem.spec.cpu, tests=cases, benchmarks=cases)
            spec = dataclasses.replace(problem.spec, tests=cases, benchmarks=cases, cpu=cpu)
            problem = dataclasses.replace(problem, spec=spec)
        fence = self.fence_plan()  # (before this process's first CUDA context: an MPS client from the start)
        device = detect(self.device)
        if not device.is_gpu:
            fence = CPU_TIMING
        elif device.vendor != "nvidia" and fence == "fenced":
            fence = f"unverified: no fence on {device.vendor} GPUs yet (the worker's own events)"
        return RunContext(problem, device, self.small or not device.is_gpu, Path(self.log_dir), secret=self.secret,
                          bandwidth=self.bandwidth, graph=self.graph and device.is_gpu, sandbox=self.sandbox,
                          private=tuple(Path(p) for p in self.private), audit=self.audit, fence=fence,
                          shared=tuple(Path(p) for p in self.shared), watch=self.watch(device), energy=self.energy,
                          diagnostics=self.diagnostics and device.is_gpu)

    def watch(self, device):
        """The GPU's gauges around benchmark cases (harness/gpuwatch.py), for timed modes on a GPU."""
        from harness.gpuwatch import open_watch

        timed = self.mode in ("benchmark", "leaderboard")
        return open_watch(device.vendor, device.is_gpu) if timed else None

    def fence_plan(self) -> str:
        """"fenced" where timed GPU calls will be measured by the parent (its MPS daemon started
        now, harness/mps.py), else "unverified: why" (one line, shown and stored with the results)."""
        if self.mode not in ("benchmark", "leaderboard"):
            return "unverified: no timed calls"
        if self.device == "cpu":
            return CPU_TIMING
        if not self.audit:
            return "unverified: --no-audit (the worker's own events)"
        from harness import mps

        why = mps.start()
        return "fenced" if why is None else f"unverified: {why} (the worker's own events)"
