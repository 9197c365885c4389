"""The profiled process of `--ncu` / `--rocprof` (harness/parent/vendor_profile.py starts it under the
vendor's profiler, inside the worker's sandbox): one case, warm-up, then exactly one call inside the
profiler range. It runs the submission, so it sits on the sandboxed side and imports nothing of
the parent's."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

WARMUP_CALLS = 2


def main(argv: list[str] | None = None) -> int:
    """The profiled process: one case, warm-up, then exactly one call inside the profiler range."""
    parser = argparse.ArgumentParser(prog="python -m harness.worker.profiled")
    parser.add_argument("--task", required=True)
    parser.add_argument("--submission", required=True)
    parser.add_argument("--case", type=int, default=0)
    parser.add_argument("--small", action="store_true")
    args = parser.parse_args(argv)

    import torch

    from harness.worker import compat
    from harness.device import detect
    from harness.task.problem import load_problem
    from harness.worker.loop import _load, _LoadError

    problem = load_problem(args.task)
    device = detect()
    cases = problem.spec.cases("benchmark", small=args.small or not device.is_gpu)
    case = cases[args.case]
    compat.install()
    try:
        kernel = _load(args.submission)
    except _LoadError as exc:
        print(f"{args.submission}: {exc.kind}: {exc}", file=sys.stderr)
        return 1
    data = problem.generate(case.args, case.seed, device.torch_device)
    for _ in range(WARMUP_CALLS):
        kernel(data)
    if device.is_gpu:
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
    kernel(data)
    if device.is_gpu:
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    print(f"profiled one call of {Path(args.submission).name} on {problem.label(case.args)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
