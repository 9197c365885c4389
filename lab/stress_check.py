"""Call a bundled file many times on one case, fresh inputs each call, every output checked (GPU).

For intermittent wrong answers (a race): the harness stops at the first wrong timed call; this
counts them over many calls, with the file's knobs overridable as in lab/knob_sweep.py.

Usage (GPU machine, repo root):
    python lab/stress_check.py submissions/triton_fp8.py --case 1 --calls 300 [--config '{"SM90_GLUON": false}']
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.api import detect  # noqa: E402
from harness.api import load_problem  # noqa: E402
from lab.knob_sweep import load, parse_config  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("submission")
    parser.add_argument("--case", type=int, default=1, help="index into the benchmark cases")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--config", default="{}", help="knob overrides, as lab/knob_sweep.py takes them")
    args = parser.parse_args()
    module = load(str(ROOT / args.submission), 0, parse_config(args.config))   # refuses unknown knobs
    problem = load_problem(ROOT / "task.yml")
    device = detect("cuda").torch_device
    case = problem.spec.cases("benchmark")[args.case]
    wrong = []
    for i in range(args.calls):
        data = problem.generate(case.args, 1000 + i, device)
        ok, why = problem.check(module.custom_kernel(data), problem.expected(data))
        if not ok:
            wrong.append((i, why))
    for i, why in wrong[:5]:
        print(f"call {i}: {why}")
    print(f"{args.submission} {args.config} {problem.label(case.args)}: {len(wrong)} of {args.calls} calls wrong")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
