"""Correctness of triton_mxfp4.py's gfx950 path (q.K^T through tl.dot_scaled) wherever it runs.

The file takes that path on MI355X only; this forces it (QK_DOT_SCALED = "all") with the portable
value decoder (PTX_DECODE = False), as on AMD, runs the task's test cases (on a CPU machine the small
ones, under TRITON_INTERPRET=1), each once as planned and once cut into split-K chunks, and judges
every output with the harness's check. It must match the kv=mxfp4,q=fp8 reference (the path's fp8
query). On an NVIDIA GPU Triton emulates tl.dot_scaled: this checks the kernel's logic there, not
gfx950's lowering. Prints a one-line verdict; exit status 1 on any failure.

Usage (repo root; on a CPU machine prefix TRITON_INTERPRET=1):
    python lab/mxfp4_dot_scaled_check.py [submissions/triton_mxfp4.py]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from harness.api import detect  # noqa: E402
from harness.api import load_problem  # noqa: E402
from harness.api import load_module  # noqa: E402

EXPECTED_PATH = "kv=mxfp4,q=fp8"


def main() -> int:
    path = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "submissions" / "triton_mxfp4.py")
    sub = load_module(path, "mxfp4_dot_scaled")
    sub.QK_DOT_SCALED, sub.PTX_DECODE = "all", False
    planned = (sub.MIN_TILES_PER_SPLIT, sub.PARTIAL_LIMIT, sub.CPU_PROGRAM_SLOTS)
    device = detect()
    problem = load_problem(ROOT / "task.yml")
    failures, worst, runs = [], (0.0, ""), 0
    for split in (False, True):
        # Split-K: chunks of one tile, the partials' traffic not capped, 64 program slots on a CPU.
        sub.MIN_TILES_PER_SPLIT, sub.PARTIAL_LIMIT, sub.CPU_PROGRAM_SLOTS = (1, 1e9, 64) if split else planned
        sub._PLANS.clear()
        for case in problem.spec.cases("test", small=not device.is_gpu):
            data = problem.generate(case.args, case.seed, device.torch_device)
            expected = {EXPECTED_PATH: problem.expected(data)[EXPECTED_PATH]}
            output = sub.custom_kernel(data)
            ok, reason = problem.check(output, expected)
            label = problem.label(case.args) + (" split" if split else "")
            runs += 1
            failures += [] if ok else [f"{label}: {reason}"]
            worst = max(worst, (problem.check_ratio(output, expected)[0], label))
    print(f"mxfp4 dot_scaled path on {device.name}: {'FAIL' if failures else 'PASS'}, {runs - len(failures)} of "
          f"{runs} runs match {EXPECTED_PATH} (worst error / limit {worst[0]:.2f}, {worst[1]})"
          + (f"; first failure {failures[0]}" if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
