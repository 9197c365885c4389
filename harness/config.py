"""A run's configuration: one frozen, picklable value, built once from the command line (harness/cli/flags.py
`configuration`, a --replay bundle's flags and files included), that the CLI, the sequential loop, the
pool's evaluators, Ray tasks and popcorn all take as it is; what a run learns later (the parsed --shape
cases, the bandwidth) goes in a copy (`dataclasses.replace`). harness/parent/context.py turns it into
the engine's RunContext (the configuration with the loaded task, the detected device, what times calls)
in whichever process evaluates.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import random
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional

from harness.timing import FLOOR_FACTOR

if TYPE_CHECKING:
    from harness.device import DeviceInfo
    from harness.task.problem import Problem
    from harness.task.spec import Case


# A task's timeouts (task.yml `timeouts`, harness/task/spec.py) in words.
TIMEOUT_NAMES = {"startup": "worker start", "test_case": "test case", "benchmark_case": "benchmark case"}


def timeouts_text(limits: Mapping[str, float]) -> str:
    """A task's timeouts as a run and --help show them: "worker start 120 s, test case 120 s, ..."."""
    return ", ".join(f"{words} {limits[key]:g} s" for key, words in TIMEOUT_NAMES.items())


class UsageError(Exception):
    """Bad flags or input, found before or while a run starts: one line and exit code 2 (harness/cli/__init__.py)."""


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """Every flag's final value (a field per argparse dest, named as it: harness/cli/flags.py), and what the
    run learns before its evaluations (the parsed cases, the checked shared paths, the bandwidth)."""

    # what runs: mode, files, task, device
    mode: str = "leaderboard"          # test | benchmark | leaderboard | profile | selftest | history | compile
    popcorn_mode: Optional[str] = None  # popcorn's positional MODE (`eval.py MODE TESTFILE`)
    testfile: Optional[str] = None     # popcorn's TESTFILE
    submission: tuple[str, ...] = ()   # files or glob patterns (empty: every submissions/*.py)
    exclude: tuple[str, ...] = ()      # glob patterns left out
    task: str = ""                     # task.yml path, resolved (reference.py beside it)
    check: Optional[str] = None        # check policy (None: the task's default)
    device: Optional[str] = None       # "cpu", "cuda" or None (detect)
    small: bool = False                # the task's small shapes
    target: tuple[str, ...] = ()       # --mode compile's GPU architectures (empty: the default ones)
    # where results go and what is read back
    db: str = "results/mla-eval.db"    # the results database
    logs: str = "results/logs"         # each worker's stdout/stderr
    private: tuple[Path, ...] = ()     # paths no worker may see: the database, its folder, the logs (flags.py)
    history: bool = False
    compare: Optional[tuple[int, int]] = None
    # how cases run
    budget: Optional[float] = None     # time budget per benchmark case (None: the task's)
    graph: bool = False                # time CUDA-graph replays
    # the run's secret seed: --seed, else a fresh random one (None: the cases' public seeds)
    seed: Optional[int] = dataclasses.field(default_factory=lambda: secrets.randbits(63))
    shape: tuple[str, ...] = ()        # --shape cases as typed
    cases: Optional[tuple[dict[str, Any], ...]] = None  # run these instead of the task's (--shape parsed, popcorn's)
    timeout: Optional[float] = None    # caps every timeout of the task
    case: int = 0                      # the benchmark case of --ncu / --rocprof
    ncu: bool = False
    rocprof: bool = False
    # what is written
    json: Optional[str] = None
    csv: Optional[str] = None
    markdown: Optional[str] = None
    plot: Optional[str] = None
    html: Optional[str] = None
    bundle: Optional[str] = None       # write a replay bundle there (harness/cli/bundle.py)
    no_progress: bool = False
    # where evaluators run, and how timings are checked
    gpus: Optional[str] = None         # "all" or a number: evaluators in parallel (harness/cli/run_parallel.py)
    workers: Optional[int] = None
    backend: str = "local"             # local | ray
    address: Optional[str] = None      # the Ray cluster
    sandbox: str = "auto"              # auto | require | off (harness/parent/launch.py)
    share: Optional[tuple[str, ...]] = None  # --share as typed
    shared: tuple[Path, ...] = ()      # --share's paths, checked and resolved (flags.shared_paths) by the run
    no_audit: bool = False             # no outside timing of GPU calls (fence, profiler's audit)
    baseline: Optional[str] = None     # speedups over this file (resolved once the run has found it)
    energy: bool = False               # joules per call from the GPU's energy counter (harness/parent/gpuwatch.py)
    diagnostics: bool = False          # the competition's timing and isolated calls beside the ranked one
    bandwidth: Optional[float] = None  # measured copy bandwidth, bytes/s (GPU runs)
    # the command line, and a --replay's bundle
    argv: tuple[str, ...] = ()         # as typed (recorded in a --bundle)
    replay: Optional[str] = None       # the bundle replayed
    replay_notes: tuple[str, ...] = ()  # what the replay runs (bundle.replay_args)
    replayed: tuple[dict[str, Any], ...] = ()  # the bundle's result rows, compared with the replay's
    replayed_sha256: frozenset[str] = frozenset()  # the bundle's submissions' (any other file ran: a change)
    replayed_names: tuple[tuple[str, str], ...] = ()  # (path run, the name the bundled run gave that file)


@dataclasses.dataclass(frozen=True)
class RunContext:
    """What the parent knows for a whole run: its configuration, and what this process found for it
    (the task loaded, the device, what times calls, the GPU's gauges); none of it is sent to a worker.
    The properties are the configuration's values as this device takes them."""

    problem: Problem
    device: DeviceInfo
    config: RunConfig = dataclasses.field(default_factory=RunConfig)
    fence: str = "unverified: not fenced"  # "fenced" where the parent's fence times calls (harness/parent/fence.py),
                                             # else what times them and why it is unverified
    watch: Any = None                  # the GPU's gauges (harness/parent/gpuwatch.py Watch), read around benchmark cases

    @property
    def small(self) -> bool:
        """The task's small shapes: asked for, or no GPU."""
        return self.config.small or not self.device.is_gpu

    @property
    def graph(self) -> bool:
        """Time CUDA-graph replays of the call (--graph, on a GPU)."""
        return self.config.graph and self.device.is_gpu

    @property
    def diagnostics(self) -> bool:
        """DIAGNOSTIC_CALLS calls per case timed the competition's way and as isolated calls, by the
        worker, beside the ranked number (--diagnostics, on a GPU)."""
        return self.config.diagnostics and self.device.is_gpu

    @property
    def log_dir(self) -> Path:
        return Path(self.config.logs)

    @property
    def secret(self) -> Optional[int]:
        """The run's secret seed (None: the cases' public seeds)."""
        return self.config.seed

    @property
    def bandwidth(self) -> Optional[float]:
        return self.config.bandwidth

    @property
    def sandbox(self) -> str:
        return self.config.sandbox

    @property
    def private(self) -> tuple[Path, ...]:
        return tuple(Path(p) for p in self.config.private)

    @property
    def shared(self) -> tuple[Path, ...]:
        return tuple(Path(p) for p in self.config.shared)

    @property
    def audit(self) -> bool:
        """Outside timing of GPU calls (the fence, the profiler's audit where it cannot fence)."""
        return not self.config.no_audit

    @property
    def energy(self) -> bool:
        return self.config.energy

    def case_seed(self, case: Case) -> int:
        """The seed a case's inputs are drawn from: its public seed keyed with the run's secret
        (HMAC-SHA256), so answers cannot be precomputed, and a worker that learns some case seeds
        (the CPU generator keeps 32 bits of a seed: a search over them finds it from the inputs)
        learns nothing about the secret or the other cases' seeds. (A pairing function, GPU MODE's
        way of mixing POPCORN_SEED, gave the secret away from two consecutive case seeds.)"""
        if self.secret is None:
            return case.seed
        digest = hmac.new(str(self.secret).encode(), f"case seed {case.seed}".encode(), hashlib.sha256).digest()
        return int.from_bytes(digest[:8], "big") % (2**63 - 1)

    def timed_seeds(self, case: Case) -> Callable[[], int]:
        """Seeds for a case's timed calls: drawn from the run's secret, so `--seed` reproduces a
        run exactly while nobody without the secret can predict them."""
        if self.secret is None:
            return lambda: secrets.randbits(63)
        rng = random.Random(f"{self.secret}:{case.kind}:{case.index}")
        return lambda: rng.getrandbits(63)

    def floor_s(self, data: Any) -> Optional[float]:
        """The least time any legitimate kernel needs for these inputs: the fewest bytes it must
        move (over the formats it may read) at the measured bandwidth."""
        if not self.bandwidth:
            return None
        least = self.problem.min_bytes(data)
        return least / self.bandwidth * FLOOR_FACTOR if least else None
