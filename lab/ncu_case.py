"""One call of a submission on one benchmark case, between cudaProfilerStart/Stop (GPU), for
Nsight Compute with `--profile-from-start off`: the kernels of exactly that call, warmed up.

Usage (GPU machine, repo root):
    ncu --profile-from-start off --section SpeedOfLight ... python3 lab/ncu_case.py FILE CASE ['{"KNOB": value}'] (knobs as lab/knob_sweep.py takes them)
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from harness.api import detect  # noqa: E402
from harness.api import load_problem  # noqa: E402
from lab.knob_sweep import load, parse_config  # noqa: E402


def main() -> int:
    path, case = sys.argv[1], int(sys.argv[2])
    knobs = parse_config(sys.argv[3]) if len(sys.argv) > 3 else {}
    problem = load_problem(ROOT / "task.yml")
    spec = problem.spec.cases("benchmark")[case]
    data = problem.generate(spec.args, spec.seed, detect("cuda").torch_device)
    fn = load(path, 0, knobs).custom_kernel
    for _ in range(3):
        fn(data)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    fn(data)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    print(f"{Path(path).name} {knobs} {problem.label(spec.args)}: one call profiled")
    return 0


if __name__ == "__main__":
    sys.exit(main())
