"""Check the Gluon path (sm_90) of triton_fp8.py or triton_mxfp4.py on every test case and on ragged
long batches (GPU).

The harness's tests run each file as it plans itself, which gives the Gluon kernel only the test
cases it is chosen for. Here it is forced on (SM90_GLUON) for every batch of one query row (SM90_SHORT_KV), and
each output is checked against the task's check, with the plan (launch, splits) printed beside it.

Usage (an sm_90 GPU machine, repo root):
    python lab/sm90_check.py [--file fp8|mxfp4]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.api import detect  # noqa: E402
from harness.api import load_problem  # noqa: E402
from harness.api import load_module  # noqa: E402

RAGGED = (  # long and short sequences in one batch: empty chunks, partial tiles, one-row sequences
    ({"batchsize": 6, "qseqlen": 1, "kvseqlen": 8192, "kvseqlens": [8192, 1, 4097, 63, 65, 6000]}, 11),
    ({"batchsize": 3, "qseqlen": 1, "kvseqlen": 16384, "kvseqlens": [16384, 64, 129]}, 12),
    ({"batchsize": 140, "qseqlen": 1, "kvseqlen": 1000}, 13),
)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--file", choices=("fp8", "mxfp4"), default="fp8")
    fmt = parser.parse_args().file
    module = load_module(str(ROOT / "submissions" / f"triton_{fmt}.py"), "sm90_check")
    module.SM90_GLUON = module.SM90_SHORT_KV = True   # on, even where the file ships it off
    problem = load_problem(ROOT / "task.yml")
    device = detect("cuda").torch_device
    cases = [(c.args, c.seed) for c in problem.spec.cases("test")] + list(RAGGED)
    failed = 0
    for args, seed in cases:
        data = problem.generate(args, seed, device)
        ok, why = problem.check(module.custom_kernel(data), problem.expected(data))
        plan = module._PLANS[(args["batchsize"], data[0].shape[0], data[1][fmt][0].shape[0], data[0].device)]
        wide = plan["sm90"] is getattr(module, "SM90_WIDE_LAUNCH", None)
        path = "gluon" + (" wide" if wide else "") if plan["sm90"] else "portable"
        print(f"{problem.label(args):>24}  {path:<10} groups {plan['q_groups']} splits {plan['splits']:>3}  {'ok' if ok else 'WRONG'}  {why}")
        failed += not ok
    print(f"{len(cases) - failed} of {len(cases)} match")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
