"""Time submissions under several settings of their module-level tuning knobs (GPU).

Each (file, configuration) pair loads the file afresh, overrides the named module constants,
checks the output of one call against the task's check, then times calls the way the harness
does (`harness.worker.timer.CallTimer`: L2 flushed, launches hidden, events around one call). Several
files compare variants of a kernel; the registers and spills of their compiled Triton kernels
are printed beside the times.

Usage (GPU machine, repo root):
    python lab/knob_sweep.py submissions/triton_bf16.py [more files] --cases 0,1,2,4 \
        --config '{}' --config '{"COMBINE_BLOCK_ELEMS": 2048}'
A configuration is a JSON object, or a Python literal where JSON cannot say it (tuple keys): a
dict-valued knob is updated one level deep ({**old, **new}), not replaced, so
    --config "{'LAUNCH': {(1, False): {'block_n': 64, 'num_warps': 4, 'num_stages': 2}}}"
changes one entry of LAUNCH, and that entry must be given whole; an entry cannot be removed, and
an empty dict changes nothing.
Prints one markdown table: median µs per case and configuration, and the geomean over the cases.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.api import detect  # noqa: E402
from harness.api import load_problem  # noqa: E402
from harness.api import load_module  # noqa: E402
from harness.api import CallTimer  # noqa: E402


def load(path: str, tag: int, knobs: dict):
    module = load_module(path, f"swept_{tag}")
    for name, value in knobs.items():
        if not hasattr(module, name):
            raise SystemExit(f"{path}: no knob named {name}")
        old = getattr(module, name)
        setattr(module, name, {**old, **value} if isinstance(old, dict) and isinstance(value, dict) else value)
    return module


def parse_config(text: str) -> dict:
    """A --config: JSON, else a Python literal (for tuple keys)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return ast.literal_eval(text)


def show(knobs: dict) -> str:
    try:
        return json.dumps(knobs)
    except TypeError:
        return repr(knobs)


def compiled_resources(module) -> str:
    """Registers and spills of every Triton kernel the module has compiled so far (Triton 3.x
    keeps them per device in JITFunction.device_caches; other versions: left out)."""
    from triton.runtime.jit import JITFunction

    found = []
    for name, value in vars(module).items():
        fn = value if isinstance(value, JITFunction) else getattr(value, "fn", None)  # autotune wrappers
        if not isinstance(fn, JITFunction):
            continue
        for cache in getattr(fn, "device_caches", {}).values():
            for kernel in cache[0].values():
                found.append(f"{name.strip('_')} {getattr(kernel, 'n_regs', '?')} regs "
                             f"{getattr(kernel, 'n_spills', '?')} spills")
    return "; ".join(sorted(set(found)))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("submissions", nargs="+")
    parser.add_argument("--cases", default="0,1,2,4")
    parser.add_argument("--config", action="append", default=[], help="knob overrides: JSON, or a Python literal (dict knobs are updated; see above)")
    parser.add_argument("--calls", type=int, default=40)
    args = parser.parse_args()

    info = detect("cuda")
    problem = load_problem(ROOT / "task.yml")
    timer = CallTimer("cuda", info.l2_bytes)
    cases = [problem.spec.cases("benchmark")[int(i)] for i in args.cases.split(",")]
    inputs = [(problem.label(c.args), problem.generate(c.args, c.seed, info.torch_device)) for c in cases]
    expected = [problem.expected(data) for _, data in inputs]
    configs = [parse_config(c) for c in args.config] or [{}]
    rows = []
    for tag, (path, knobs) in enumerate((p, k) for p in args.submissions for k in configs):
        module = load(path, tag, knobs)
        fn = module.custom_kernel
        medians = []
        for (label, data), want in zip(inputs, expected):
            ok, why = problem.check(fn(data), want)
            if not ok:
                print(f"{knobs} {label}: WRONG: {why}")
            for _ in range(3):
                fn(data)
            medians.append(statistics.median(timer(fn, data, timed=True)[1]["device_s"] * 1e6
                                             for _ in range(args.calls)))
        rows.append((Path(path).name, knobs, medians, compiled_resources(module)))
        print(f"{Path(path).name} {show(knobs)}: " + " ".join(f"{m:.1f}" for m in medians), flush=True)
    labels = [label for label, _ in inputs]
    print(f"\non {info.describe()}, median µs over {args.calls} calls each")
    print("| file | knobs | " + " | ".join(labels) + " | geomean | compiled kernels |")
    print("|---" * (len(labels) + 4) + "|")
    for name, knobs, medians, resources in rows:
        geo = math.exp(sum(map(math.log, medians)) / len(medians))
        print(f"| {name} | {show(knobs)} | " + " | ".join(f"{m:.1f}" for m in medians)
              + f" | {geo:.1f} | {resources} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
