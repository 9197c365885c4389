"""The Triton kernels a submission launches for the task's benchmark shapes on an NVIDIA GPU,
compiled offline on a machine without one: registers, local memory (spills), shared memory and
matrix instructions per specialization, as the GPU would compile them.

`python -m harness.compile` plans a file's launches as on the target GPU, but only for the
task's small test cases, so it sees only their specializations (on the H200 the swapped-QK
candidates spilled 124-376 registers at benchmark shapes where the small cases showed none:
BENCHMARKS.md session 11). Here the inputs are the benchmark shapes instead: the file's
`_interpreted` answers False and the device reports `--sms` multiprocessors, its inputs are `meta`
tensors of the benchmark shapes (no memory, no data), and
every launch is recorded, not run; the launches are then compiled by harness.compile.capture's
compile stage (Triton's own ptxas, no GPU). Only for files built like the bundled Triton ones
(a module-level `_interpreted(device)` and a plan from `torch.cuda.get_device_properties`).

Usage (repo root; Triton with its NVIDIA backend, e.g. the H200's Triton 3.6 under PYTHONPATH):
    python lab/plan_compile.py submissions/triton_fp8.py [--cases 0,5] [--sms 132] [--target sm_90]
"""

from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported: kernels become recordable functions

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import types  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from harness.api import Recorder  # noqa: E402
from harness.api import load_problem  # noqa: E402
from harness.api import load_module  # noqa: E402

SMALL_KV = 7  # KV rows per sequence of the CPU case whose layout is scaled up (odd: no q dimension matches it)


def meta_inputs(problem, args: dict):
    """The inputs of a case with these arguments, as meta tensors: a CPU case of the same batch and
    query length with SMALL_KV cache rows, each tensor's KV dimension scaled to the real length."""
    small = problem.generate({**args, "kvseqlen": SMALL_KV}, 1, torch.device("cpu"))
    small_rows, rows = args["batchsize"] * SMALL_KV, args["batchsize"] * args["kvseqlen"]

    def grow(value):
        if isinstance(value, torch.Tensor):
            shape = list(value.shape)
            if shape and shape[0] == small_rows:
                shape[0] = rows
            return torch.empty(shape, dtype=value.dtype, device="meta")
        if isinstance(value, (tuple, list)):
            return type(value)(grow(v) for v in value)
        if isinstance(value, dict):
            return {k: grow(v) for k, v in value.items()}
        return value

    q, kv, qo, kvp, config = small
    return grow(q), grow(kv), grow(qo), grow(kvp), {**config, "kv_seq_len": args["kvseqlen"]}


def capture(path: str, problem, cases: list, sms: int) -> list[dict]:
    recorder = Recorder()
    from triton.runtime.interpreter import InterpretedFunction

    def record_only(self, *args, grid, warmup, **kwargs):
        recorder.record(self.fn, args, kwargs, launched=not warmup)

    InterpretedFunction.run = record_only
    module = load_module(path, "plan_compile_submission")
    module._interpreted = lambda device: False
    torch.cuda.get_device_properties = lambda device=None: types.SimpleNamespace(multi_processor_count=sms)
    for case in cases:
        recorder.case = problem.label(case.args)
        module.custom_kernel(meta_inputs(problem, case.args))
    return list(recorder.launches.values())


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("submission")
    parser.add_argument("--cases", default="0,1,2,3,4,5,6,7", help="benchmark case indices")
    parser.add_argument("--sms", type=int, default=132, help="multiprocessors the plan fills (H200: 132)")
    parser.add_argument("--target", default="sm_90")
    args = parser.parse_args()
    problem = load_problem(ROOT / "task.yml")
    bench = problem.spec.cases("benchmark")
    launches = capture(args.submission, problem, [bench[int(i)] for i in args.cases.split(",")], args.sms)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    payload = {"submission": str(Path(args.submission).resolve()), "launches": launches, "targets": [args.target]}
    done = subprocess.run([sys.executable, "-m", "harness.compile.capture", "--compile-stage"],
                          input=json.dumps(payload), capture_output=True, text=True, env=env, cwd=ROOT)
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    print(f"{Path(args.submission).name}, {args.target}, plans for {args.sms} SMs; one row per specialization")
    print("| kernel | cases | warps / stages | constexprs | regs | local B (spills x 4) | shared KiB | matrix instructions | status |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        if "problem" in row:
            print(f"compile stage: {row['problem']}")
            continue
        options = row.get("options", {})
        shown = {k: v for k, v in row.get("constexprs", {}).items() if k not in ("NUM_HEADS", "D_NOPE", "D_ROPE")}
        print(f"| {row['kernel']} | {' '.join(row['cases'])} | {options.get('num_warps')} / {options.get('num_stages')} "
              f"| {json.dumps(shown)} | {row.get('vgpr')} | {row.get('scratch_bytes')} "
              f"| {(row.get('lds_bytes') or 0) / 1024:.1f} | {', '.join(row.get('matrix') or [])} "
              f"| {row['status']}{': ' + str(row['error'])[:80] if row.get('error') else ''} |")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
