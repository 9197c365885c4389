"""A run's evaluators in other processes: --gpus / --workers (harness/parent/pool.py) or --backend ray
(harness/parent/ray_backend.py), planned and checked before anything runs, each handed the run's
configuration as it is."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from harness.config import RunConfig, UsageError
from harness.results import SubmissionResult


def parallel(config: RunConfig) -> bool:
    """Whether the flags ask for evaluators in other processes (--gpus, --workers, --backend ray)."""
    return (config.backend == "ray" or config.gpus is not None or config.workers is not None
            or config.address is not None)


def pool_plan(config: RunConfig, device) -> tuple[int, int]:
    """(GPUs, evaluators) for a parallel run, checked before anything runs."""
    usable = device.count if device.is_gpu else 0
    if config.gpus in (None, "all"):
        gpus = usable
    else:
        try:
            gpus = int(config.gpus)
        except ValueError:
            raise UsageError(f"--gpus {config.gpus}: expected all or a number") from None
        if not 0 <= gpus <= usable and config.backend != "ray":  # Ray's GPUs are the cluster's
            raise UsageError(f"--gpus {gpus}: this machine has {usable} usable GPU(s)")
    if config.address and config.backend != "ray":
        raise UsageError("--address goes with --backend ray")
    workers = config.workers if config.workers is not None else max(gpus, 1)
    if workers < 1:
        raise UsageError("--workers must be at least 1")
    if gpus and workers > gpus and config.energy and config.backend != "ray":
        raise UsageError(f"--energy: {workers} evaluators would share {gpus} GPU(s), and a GPU's energy counter "
                         "counts all of their work: give --workers no more than --gpus")
    return gpus, workers


def evaluate_parallel(config: RunConfig, device, submissions: list[Path], record, gpus: int,
                      workers: int) -> list[SubmissionResult]:
    """--gpus / --workers / --backend ray: evaluators in other processes (harness/parent/pool.py), each
    handed the run's configuration as it is (pinned to its GPU, or to the CPU)."""
    from harness import report
    from harness.parent.pool import PoolError, evaluate_parallel, slot_envs

    # (a GPU named, never detected: an evaluator that finds none fails loudly instead of running on the CPU)
    settings = dataclasses.replace(config, device="cuda" if gpus else "cpu")
    done = lambda index, result: record(result)  # noqa: E731
    if config.backend == "ray":
        from harness.parent.ray_backend import RayMissing, evaluate_ray

        # (each GPU task starts or adopts an MPS daemon on its own node and fences its calls there:
        # harness/parent/ray_backend.py)
        report.err_console.print(f"Ray: {len(submissions)} task(s), {'1 GPU' if gpus else '1 CPU'} each, "
                                 f"cluster {config.address or 'local'}")
        try:
            return evaluate_ray(submissions, settings, config.address, done, num_cpus=config.workers)
        except RayMissing as exc:
            raise UsageError(str(exc)) from None
    if gpus and workers > gpus and config.mode != "test":
        report.err_console.print(f"warning: {workers} evaluators share {gpus} GPU(s): timed runs overlap on a "
                                 "GPU, so timings are not clean (use this for --mode test)")
    if not gpus and workers > 1 and config.mode != "test":
        report.err_console.print(f"warning: {workers} evaluators share this machine's CPUs: timed runs overlap, so "
                                 "timings are not clean (use this for --mode test)")
    report.err_console.print(f"{workers} evaluator(s) in parallel on "
                             + (f"{gpus} GPU(s)" if gpus else "the CPU"))
    try:
        again = lambda path: report.err_console.print(  # noqa: E731
            f"{path.name}: timed out or crashed beside other evaluators: evaluated again alone at the end")
        return evaluate_parallel(submissions, settings, slot_envs(gpus, workers, device.vendor), done, again)
    except PoolError as exc:
        raise UsageError(str(exc)) from None
